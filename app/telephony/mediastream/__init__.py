"""Telephony media streams over WebSocket (Twilio's protocol): μ-law 8 kHz in and out."""
