"""Clients of the agent server for tests, benchmarks and smoke checks; not part of the server."""

from clients.wav import RATE, load_wav
from clients.webrtc import AgentClient, Recording, Refused, WavMicrophone

__all__ = ["RATE", "AgentClient", "Recording", "Refused", "WavMicrophone", "load_wav"]
