"""The Anthropic Messages adapter.

`mapping` converts our requests to and from the wire JSON, `stream` parses the event stream,
`errors` maps error bodies, `encode` writes responses (for the scripted model server).
"""

from nodmix.providers.anthropic.provider import AnthropicProvider

__all__ = ["AnthropicProvider"]
