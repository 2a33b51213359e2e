"""The Google Chat channel (HTTP endpoint, Chat REST API, google-auth)."""
