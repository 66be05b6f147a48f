"""The OpenAI Realtime dialect: the only code that knows its wire format.

Client events become typed commands and then Session verbs; session messages
become GA server events. Used by the WebRTC data channel and the WebSocket.
"""
