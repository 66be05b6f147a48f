"""The words every layer shares, below the engines: chat messages and tools, transcripts
and speech, and the PCM that flows between transports and sessions. Nothing here runs
a model, so a dialect or a session can speak of these without importing an engine."""
