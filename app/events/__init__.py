"""What the OpenAI dialects (app/realtime, app/live) share: JSON events on a channel,
and base64 audio in the formats their clients may choose."""
