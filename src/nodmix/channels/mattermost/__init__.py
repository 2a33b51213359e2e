"""The Mattermost channel."""
