"""Pictures and voice: images checked, downscaled and shown to vision models; voice notes
transcribed; replies spoken.

- `images`: Pillow decoding with size guards, downscaling, encoding (`prepare_image`,
  `image_block`: the reusable path for tool images such as screenshots);
- `sniff`: what a saved file is (image, audio, other) from its first bytes;
- `cache`: prepared images kept in memory (bounded), keyed by the file's identity;
- `resolver`: the images of a request, per model: pixels for vision models in the last
  `keepImageTurns` turns, a one-line note otherwise;
- `ingest`: a message's saved files into the turn's user message (image references,
  transcripts, file notes);
- `audio`, `convert`: the provider's OpenAI-compatible `/audio/transcriptions` and
  `/audio/speech`, and ffmpeg for audio conversion;
- `prefs`: per-chat `/tts on|off` (a small store protocol with a file implementation);
- `service`: the parts the composition root wires together.
"""
