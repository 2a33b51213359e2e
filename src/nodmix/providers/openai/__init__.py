"""The OpenAI chat-completions adapter (also Ollama, vLLM, LM Studio and OpenRouter).

`mapping` converts our requests to and from the wire JSON, `stream` parses the streamed chunks,
`errors` maps error bodies, `encode` writes responses (for the scripted model server).
"""

from nodmix.providers.openai.provider import OpenAIProvider

__all__ = ["OpenAIProvider"]
