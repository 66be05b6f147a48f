"""Clients of the agent server for tests, benchmarks and smoke checks; not part of the server."""

from clients.wav import RATE, load_wav
from clients.webrtc import AgentClient, Recording, WavMicrophone

__all__ = ["RATE", "AgentClient", "Recording", "WavMicrophone", "load_wav"]
