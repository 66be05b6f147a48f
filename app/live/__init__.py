"""OpenAI's Live API (the `client.live` of the openai SDK): a second dialect over the
same sessions as Realtime."""
