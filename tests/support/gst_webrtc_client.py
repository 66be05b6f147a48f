#!/usr/bin/python3
"""A WebRTC test caller built on GStreamer's webrtcbin (not aiortc).

It calls a server the way a telephony gateway's WebRTC leg would: one audio
m-line, PCMU only (payload type 0, 8 kHz), sendrecv, no data channel, and a
non-trickle offer (ICE gathering completes before the offer is sent).

The "microphone" is a WAV file (any rate / channel count, converted to 8 kHz
mono), played once the call is connected and followed by silence for the rest
of the call. Everything received is decoded from PCMU and recorded to a WAV
(16-bit mono 8 kHz), finalised with EOS so wavenc writes a correct header.

Signalling:
  --offer URL   POST {"sdp": ..., "type": "offer"} as JSON; the reply is
                {"sdp": ..., "type": "answer", "session_id": ...}.
  --whip URL    WHIP (RFC 9725): POST application/sdp, expect 201 Created with
                the answer as the body and a Location header (the session
                resource, resolved against the endpoint URL); DELETE it at the end.

Run with Debian's interpreter (/usr/bin/python3) after
  apt-get install --no-install-recommends python3-gst-1.0 gir1.2-gst-plugins-bad-1.0 \
      gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad \
      gstreamer1.0-nice

Prints one JSON line to stdout at the end; progress goes to stderr.
Exit codes: 0 ok, 2 HTTP/signalling error, 3 never connected, 4 media error,
1 bad usage / input.
"""

from __future__ import annotations

import argparse
import array
import base64
import hashlib
import json
import math
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import wave

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstSdp", "1.0")
gi.require_version("GstWebRTC", "1.0")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC  # noqa: E402

RATE = 8000
FRAME_MS = 20
FRAME_SAMPLES = RATE * FRAME_MS // 1000  # 160 samples = 320 bytes of S16LE
FRAME_BYTES = FRAME_SAMPLES * 2
PCMU_CAPS = "application/x-rtp,media=audio,encoding-name=PCMU,payload=0,clock-rate=8000"
RAW_CAPS = f"audio/x-raw,format=S16LE,layout=interleaved,rate={RATE},channels=1"
VOICE_RMS = 300  # a 20 ms frame louder than this counts as voiced (full scale 32767)
T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[{time.monotonic() - T0:7.3f}] {message}", file=sys.stderr, flush=True)  # noqa: T201 - a command-line tool


class HttpFailure(Exception):
    def __init__(self, message: str, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are followed by hand so a 307/308 re-POSTs the offer (RFC 9725 §4.5)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def http(method: str, url: str, body: bytes | None, headers: dict[str, str], timeout: float):
    """One request: (status, headers, body, final url); never raises on an HTTP status."""
    for _hop in range(5):
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                return response.status, response.headers, response.read(), url
        except urllib.error.HTTPError as exc:
            data = exc.read() if exc.fp is not None else b""
            if exc.code in (301, 302, 303, 307, 308) and exc.headers.get("Location"):
                url = urllib.parse.urljoin(url, exc.headers["Location"])
                log(f"{method} redirected ({exc.code}) to {url}")
                continue
            return exc.code, exc.headers, data, url
        except (urllib.error.URLError, OSError) as exc:
            raise HttpFailure(f"{method} {url} failed: {exc}") from exc
    raise HttpFailure(f"{method} {url}: too many redirects")


def decode_wav(path: str) -> bytes:
    """Any WAV (any rate/channels/format decodebin handles) -> 8 kHz mono S16LE bytes."""
    pipeline = Gst.parse_launch(
        "filesrc name=src ! decodebin ! audioconvert ! audioresample ! "
        f"{RAW_CAPS} ! appsink name=sink sync=false"
    )
    pipeline.get_by_name("src").set_property("location", path)
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PLAYING)
    chunks = []
    while True:
        sample = sink.emit("pull-sample")
        if sample is None:
            break
        buf = sample.get_buffer()
        chunks.append(buf.extract_dup(0, buf.get_size()))
    msg = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
    pipeline.set_state(Gst.State.NULL)
    if msg is not None:
        err, dbg = msg.parse_error()
        raise RuntimeError(f"cannot decode {path}: {err.message} ({dbg})")
    return b"".join(chunks)


def frame_rms(data: bytes) -> float:
    samples = array.array("h")
    samples.frombytes(data[: len(data) - len(data) % 2])
    if sys.byteorder != "little":
        samples.byteswap()
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples))


class Call:
    def __init__(self, args: argparse.Namespace, speech: bytes) -> None:
        self.args = args
        self.speech = speech
        self.loop = GLib.MainLoop()
        self.headers = dict(args.header)
        self.result: dict = {
            "mode": "whip" if args.whip else "offer",
            "url": args.whip or args.offer,
            "http_status": None,
            "location": None,
            "etag": None,
            "link": None,
            "content_type": None,
            "session_id": None,
            "connected": False,
            "connect_seconds": None,
            "sent_speech_seconds": round(len(speech) / 2 / RATE, 3),
            "received_seconds": 0.0,
            "received_voiced_seconds": 0.0,
            "fingerprint_verified": None,
            "delete_status": None,
            "output": os.path.abspath(args.output),
            "error": None,
        }
        self.exit_code = 0
        self.resource_url: str | None = None
        self.offer_sent = False
        self.connected_at: float | None = None
        self.finishing = False
        self.recorder_eos = threading.Event()
        self.recorder: list[Gst.Element] = []
        self.recv_bytes = 0
        self.voiced_frames = 0.0
        self.lock = threading.Lock()
        # microphone state
        self.mic_start: float | None = None
        self.frames_sent = 0
        self.speech_at: int | None = None  # frame index where speech starts
        self._build()

    # -- pipeline ---------------------------------------------------------------------------

    def _build(self) -> None:
        self.pipe = Gst.Pipeline.new("call")
        self.webrtc = Gst.ElementFactory.make("webrtcbin", "webrtc")
        if self.webrtc is None:
            raise RuntimeError(
                "no webrtcbin: install gstreamer1.0-plugins-bad and gstreamer1.0-nice"
            )
        self.webrtc.set_property("bundle-policy", GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE)
        if self.args.stun:
            self.webrtc.set_property("stun-server", self.args.stun)
        self.pipe.add(self.webrtc)

        self.appsrc = Gst.ElementFactory.make("appsrc", "mic")
        self.appsrc.set_property("caps", Gst.Caps.from_string(RAW_CAPS))
        self.appsrc.set_property("format", Gst.Format.TIME)
        self.appsrc.set_property("is-live", True)
        self.appsrc.set_property("do-timestamp", False)
        chain = [self.appsrc]
        for factory, props in (
            ("audioconvert", {}),
            ("mulawenc", {}),
            (
                "rtppcmupay",
                {"pt": 0, "min-ptime": FRAME_MS * 1_000_000, "max-ptime": FRAME_MS * 1_000_000},
            ),
            ("capsfilter", {"caps": Gst.Caps.from_string(PCMU_CAPS)}),
        ):
            element = Gst.ElementFactory.make(factory, None)
            if element is None:
                raise RuntimeError(f"missing GStreamer element {factory}")
            for key, value in props.items():
                element.set_property(key, value)
            chain.append(element)
        for element in chain:
            self.pipe.add(element)
        for a, b in zip(chain, chain[1:], strict=False):
            if not a.link(b):
                raise RuntimeError(f"cannot link {a.get_name()} -> {b.get_name()}")

        sinkpad = self.webrtc.request_pad_simple("sink_%u")
        if chain[-1].get_static_pad("src").link(sinkpad) != Gst.PadLinkReturn.OK:
            raise RuntimeError("cannot link the payloader to webrtcbin")
        transceiver = sinkpad.get_property("transceiver")
        transceiver.set_property("direction", GstWebRTC.WebRTCRTPTransceiverDirection.SENDRECV)
        transceiver.set_property("codec-preferences", Gst.Caps.from_string(PCMU_CAPS))
        self.transceiver = transceiver
        self.answer_sdp = ""

        self.webrtc.connect("on-negotiation-needed", self._on_negotiation_needed)
        self.webrtc.connect("notify::ice-gathering-state", self._on_gathering)
        self.webrtc.connect("notify::ice-connection-state", self._on_ice_state)
        self.webrtc.connect("notify::connection-state", self._on_connection_state)
        self.webrtc.connect("pad-added", self._on_pad_added)

        bus = self.pipe.get_bus()
        bus.add_signal_watch()
        bus.connect("message", self._on_bus)

    def run(self) -> int:
        self.pipe.set_state(Gst.State.PLAYING)
        GLib.timeout_add(10, self._mic_tick)
        GLib.timeout_add(int(self.args.connect_timeout * 1000), self._connect_deadline)
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, self._on_sigint)
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, self._on_sigint)
        self.loop.run()
        self._teardown()
        return self.exit_code

    # -- microphone: paced by the monotonic clock, 20 ms frames ------------------------------

    def _mic_tick(self) -> bool:
        if self.finishing:
            return False
        now = time.monotonic()
        if self.mic_start is None:
            self.mic_start = now
            clock = self.pipe.get_clock()
            self.mic_base = clock.get_time() - self.pipe.get_base_time() if clock else 0
        due = int((now - self.mic_start) * 1000 // FRAME_MS) + 1
        while self.frames_sent < due:
            data = self._next_frame()
            buf = Gst.Buffer.new_wrapped(data)
            buf.pts = self.mic_base + self.frames_sent * FRAME_MS * Gst.MSECOND
            buf.duration = FRAME_MS * Gst.MSECOND
            self.frames_sent += 1
            if self.appsrc.emit("push-buffer", buf) != Gst.FlowReturn.OK:
                break
        return True

    def _next_frame(self) -> bytes:
        if self.speech_at is None:
            return bytes(FRAME_BYTES)
        offset = (self.frames_sent - self.speech_at) * FRAME_BYTES
        if offset < 0 or offset >= len(self.speech):
            if offset >= len(self.speech) and not getattr(self, "_speech_done_logged", False):
                self._speech_done_logged = True
                log("speech sent; sending silence for the rest of the call")
            return bytes(FRAME_BYTES)
        frame = self.speech[offset : offset + FRAME_BYTES]
        return frame + bytes(FRAME_BYTES - len(frame))

    # -- negotiation -------------------------------------------------------------------------

    def _on_negotiation_needed(self, webrtc) -> None:
        if self.offer_sent:
            log("negotiation-needed again (ignored: one offer per call)")
            return
        log("negotiation needed: creating the offer")
        promise = Gst.Promise.new_with_change_func(self._on_offer_created, None)
        webrtc.emit("create-offer", None, promise)

    def _on_offer_created(self, promise, _data) -> None:
        promise.wait()
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply is not None else None
        if offer is None:
            GLib.idle_add(
                self._fail, 4, f"create-offer failed: {reply.to_string() if reply else 'no reply'}"
            )
            return
        self.webrtc.emit("set-local-description", offer, Gst.Promise.new())
        log("local description set; waiting for ICE gathering to complete")
        GLib.timeout_add(int(self.args.gather_timeout * 1000), self._gather_deadline)
        # gathering may already be complete
        GLib.idle_add(self._maybe_send_offer)

    def _on_gathering(self, webrtc, _pspec) -> None:
        state = webrtc.get_property("ice-gathering-state")
        log(f"ICE gathering state: {state.value_nick}")
        if state == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            GLib.idle_add(self._maybe_send_offer)

    def _gather_deadline(self) -> bool:
        if not self.offer_sent:
            log("ICE gathering did not complete in time; sending the candidates gathered so far")
            self._maybe_send_offer(force=True)
        return False

    def _maybe_send_offer(self, force: bool = False) -> bool:
        if self.offer_sent or self.finishing:
            return False
        state = self.webrtc.get_property("ice-gathering-state")
        if not force and state != GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            return False
        local = self.webrtc.get_property("local-description")
        if local is None:
            return False
        self.offer_sent = True
        sdp = local.sdp.as_text()
        if self.args.print_sdp:
            log("offer SDP:\n" + sdp)
        threading.Thread(target=self._signal, args=(sdp,), daemon=True).start()
        return False

    def _signal(self, offer_sdp: str) -> None:
        """HTTP off the main loop; results go back through GLib.idle_add."""
        try:
            answer = self._post_whip(offer_sdp) if self.args.whip else self._post_offer(offer_sdp)
        except HttpFailure as exc:
            if exc.status is not None:
                log(f"HTTP error {exc.status}: {exc.body.strip()[:2000]}")
            GLib.idle_add(self._fail, 2, str(exc))
            return
        GLib.idle_add(self._apply_answer, answer)

    def _post_offer(self, offer_sdp: str) -> str:
        url = self.args.offer
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.headers}
        body = json.dumps({"sdp": offer_sdp, "type": "offer"}).encode()
        log(f"POST {url} (JSON offer, {len(offer_sdp)} bytes of SDP)")
        status, rheaders, data, _ = http("POST", url, body, headers, self.args.http_timeout)
        self._note_response(status, rheaders)
        text = data.decode("utf-8", "replace")
        if not 200 <= status < 300:
            raise HttpFailure(
                f"POST {url} returned HTTP {status}: {text.strip()[:500]}", status, text
            )
        try:
            reply = json.loads(text)
            answer = reply["sdp"]
        except (ValueError, KeyError, TypeError) as exc:
            raise HttpFailure(
                f"POST {url}: reply is not an answer JSON: {text[:500]}", status, text
            ) from exc
        if reply.get("type") != "answer":
            log(f"warning: reply type is {reply.get('type')!r}, not 'answer'")
        self.result["session_id"] = reply.get("session_id")
        log(f"answer received (HTTP {status}, session {reply.get('session_id')})")
        return answer

    def _post_whip(self, offer_sdp: str) -> str:
        url = self.args.whip
        headers = {"Content-Type": "application/sdp", "Accept": "application/sdp", **self.headers}
        log(f"POST {url} (WHIP, application/sdp, {len(offer_sdp)} bytes)")
        status, rheaders, data, final_url = http(
            "POST", url, offer_sdp.encode(), headers, self.args.http_timeout
        )
        self._note_response(status, rheaders)
        text = data.decode("utf-8", "replace")
        if not 200 <= status < 300:
            raise HttpFailure(
                f"WHIP POST {url} returned HTTP {status}: {text.strip()[:500]}", status, text
            )
        if status != 201:
            log(f"warning: WHIP endpoint answered {status}, RFC 9725 requires 201 Created")
        location = rheaders.get("Location")
        if location:
            self.resource_url = urllib.parse.urljoin(final_url, location)
            self.result["resource_url"] = self.resource_url
            log(f"WHIP session resource: {self.resource_url}")
        else:
            log("warning: WHIP 201 without a Location header: cannot DELETE the session later")
        ctype = (rheaders.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/sdp":
            log(f"warning: answer Content-Type is {ctype!r}, expected application/sdp")
        if not text.lstrip().startswith("v=0"):
            raise HttpFailure(
                f"WHIP POST {url}: body is not an SDP answer: {text[:500]}", status, text
            )
        return text

    def _note_response(self, status: int, headers) -> None:
        self.result["http_status"] = status
        self.result["location"] = headers.get("Location")
        self.result["etag"] = headers.get("ETag")
        links = headers.get_all("Link") or []
        self.result["link"] = ", ".join(links) if links else None
        self.result["content_type"] = headers.get("Content-Type")

    def _apply_answer(self, answer_sdp: str) -> bool:
        if self.finishing:
            return False
        self.answer_sdp = answer_sdp
        if self.args.print_sdp:
            log("answer SDP:\n" + answer_sdp)
        res, sdpmsg = GstSdp.SDPMessage.new_from_text(answer_sdp)
        if res != GstSdp.SDPResult.OK:
            self._fail(2, "answer SDP does not parse")
            return False
        answer = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, sdpmsg)
        promise = Gst.Promise.new_with_change_func(self._on_remote_set, None)
        self.webrtc.emit("set-remote-description", answer, promise)
        return False

    def _on_remote_set(self, promise, _data) -> None:
        promise.wait()
        reply = promise.get_reply()
        if reply is not None and reply.has_field("error"):
            err = reply.get_value("error")
            GLib.idle_add(
                self._fail, 2, f"set-remote-description failed: {getattr(err, 'message', err)}"
            )
            return
        log("remote description set; connecting")

    # -- connection state --------------------------------------------------------------------

    def _on_ice_state(self, webrtc, _pspec) -> None:
        log(f"ICE connection state: {webrtc.get_property('ice-connection-state').value_nick}")

    def _on_connection_state(self, webrtc, _pspec) -> None:
        state = webrtc.get_property("connection-state")
        log(f"peer connection state: {state.value_nick}")
        if state == GstWebRTC.WebRTCPeerConnectionState.CONNECTED:
            GLib.idle_add(self._on_connected)
        elif state == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            GLib.idle_add(self._fail, 3, "peer connection failed (ICE or DTLS)")

    def _on_connected(self) -> bool:
        if self.connected_at is not None or self.finishing:
            return False
        problem = self._check_fingerprint()
        if problem:
            self._fail(3, problem)
            return False
        self.connected_at = time.monotonic()
        self.result["connected"] = True
        self.result["connect_seconds"] = round(self.connected_at - T0, 3)
        log(f"connected (ICE + DTLS); staying {self.args.duration:g} s")
        # Speech starts after a short lead-in of silence.
        lead = int(self.args.lead_in * 1000 // FRAME_MS)
        self.speech_at = self.frames_sent + lead
        log(f"speech ({len(self.speech) / 2 / RATE:.2f} s) starts in {self.args.lead_in:g} s")
        GLib.timeout_add(int(self.args.duration * 1000), self._hangup)
        return False

    def _check_fingerprint(self) -> str | None:
        """webrtcbin 1.22 does not check the peer's certificate against a=fingerprint, so
        check it here (RFC 8122 s5: the strongest hash offered; any fingerprint may match)."""
        if self.args.no_verify_fingerprint:
            return None
        offered: dict[str, set[str]] = {}
        for algo, value in re.findall(
            r"^a=fingerprint:(\S+)\s+([0-9A-Fa-f:]+)\s*$", self.answer_sdp, re.M
        ):
            offered.setdefault(algo.lower(), set()).add(value.upper())
        algo = next(
            (a for a in ("sha-512", "sha-384", "sha-256", "sha-224", "sha-1") if a in offered), None
        )
        if algo is None:
            return "answer has no a=fingerprint we can check"
        transport = self.transceiver.get_property("sender").get_property("transport")
        pem = transport.get_property("remote-certificate") if transport is not None else None
        if not pem:
            return "DTLS connected but webrtcbin exposes no remote certificate to verify"
        body = re.search(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", pem, re.S)
        der = base64.b64decode("".join(body.group(1).split())) if body else b""
        digest = hashlib.new(algo.replace("-", ""), der).hexdigest().upper()
        actual = ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))
        self.result["fingerprint_verified"] = actual in offered[algo]
        if actual not in offered[algo]:
            return f"DTLS certificate does not match the answer's {algo} fingerprint (got {actual})"
        log(f"peer certificate matches the answer's {algo} fingerprint")
        return None

    def _connect_deadline(self) -> bool:
        if self.connected_at is None and not self.finishing:
            ice = self.webrtc.get_property("ice-connection-state").value_nick
            pc = self.webrtc.get_property("connection-state").value_nick
            self._fail(
                3,
                f"not connected within {self.args.connect_timeout:g} s "
                f"(ICE {ice}, peer connection {pc})",
            )
        return False

    # -- receiving ---------------------------------------------------------------------------

    def _on_pad_added(self, webrtc, pad) -> None:
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        caps = pad.get_current_caps() or pad.query_caps(None)
        log(f"incoming stream: {caps.to_string() if caps else '?'}")
        with self.lock:
            if self.recorder:
                log("a second incoming stream: discarded")
                sink = Gst.ElementFactory.make("fakesink", None)
                sink.set_property("async", False)
                self.pipe.add(sink)
                sink.sync_state_with_parent()
                pad.link(sink.get_static_pad("sink"))
                return
            elements = []
            for factory, props in (
                ("rtppcmudepay", {}),
                ("mulawdec", {}),
                ("audioconvert", {}),
                ("audioresample", {}),
                ("capsfilter", {"caps": Gst.Caps.from_string(RAW_CAPS)}),
                ("wavenc", {}),
                ("filesink", {"location": self.args.output, "async": False}),
            ):
                element = Gst.ElementFactory.make(factory, None)
                for key, value in props.items():
                    element.set_property(key, value)
                elements.append(element)
                self.pipe.add(element)
            for a, b in zip(elements, elements[1:], strict=False):
                a.link(b)
            elements[-2].get_static_pad("sink").add_probe(
                Gst.PadProbeType.BUFFER, self._count_probe
            )
            elements[-1].get_static_pad("sink").add_probe(
                Gst.PadProbeType.EVENT_DOWNSTREAM, self._eos_probe
            )
            for element in reversed(elements):
                element.sync_state_with_parent()
            result = pad.link(elements[0].get_static_pad("sink"))
            if result != Gst.PadLinkReturn.OK:
                log(f"cannot link the incoming stream: {result.value_nick}")
            self.recorder = elements

    def _count_probe(self, pad, info):
        buf = info.get_buffer()
        ok, mapinfo = buf.map(Gst.MapFlags.READ)
        if ok:
            data = bytes(mapinfo.data)
            buf.unmap(mapinfo)
            self.recv_bytes += len(data)
            if frame_rms(data) > VOICE_RMS:
                self.voiced_frames += len(data) / 2 / RATE
        return Gst.PadProbeReturn.OK

    def _eos_probe(self, pad, info):
        if info.get_event().type == Gst.EventType.EOS:
            self.recorder_eos.set()
        return Gst.PadProbeReturn.OK

    # -- ending ------------------------------------------------------------------------------

    def _on_bus(self, _bus, message) -> None:
        if message.type == Gst.MessageType.ERROR:
            err, dbg = message.parse_error()
            self._fail(4, f"GStreamer error from {message.src.get_name()}: {err.message} ({dbg})")
        elif message.type == Gst.MessageType.WARNING:
            err, dbg = message.parse_warning()
            log(f"GStreamer warning from {message.src.get_name()}: {err.message}")

    def _on_sigint(self) -> bool:
        log("interrupted: hanging up")
        self._hangup()
        return False

    def _fail(self, code: int, message: str) -> bool:
        if self.finishing:
            return False
        log(f"error: {message}")
        self.result["error"] = message
        self.exit_code = code
        self._hangup()
        return False

    def _hangup(self) -> bool:
        if self.finishing:
            return False
        self.finishing = True
        log("hanging up")
        if self.recorder:
            # EOS into the recording branch only: wavenc rewrites its header on EOS.
            self.recorder[0].get_static_pad("sink").send_event(Gst.Event.new_eos())
            self.recorder_eos.wait(3.0)
            if not self.recorder_eos.is_set():
                log("warning: the recorder did not see EOS in 3 s; the WAV header may be wrong")
        self.loop.quit()
        return False

    def _teardown(self) -> None:
        self.pipe.set_state(Gst.State.NULL)
        if self.connected_at is not None:
            self.result["in_call_seconds"] = round(time.monotonic() - self.connected_at, 3)
        if not self.recorder:
            with wave.open(self.args.output, "wb") as out:  # nothing came in: an empty WAV
                out.setnchannels(1)
                out.setsampwidth(2)
                out.setframerate(RATE)
        self.result["received_seconds"] = round(self.recv_bytes / 2 / RATE, 3)
        self.result["received_voiced_seconds"] = round(self.voiced_frames, 3)
        if self.resource_url:
            log(f"DELETE {self.resource_url}")
            try:
                status, _h, data, _ = http(
                    "DELETE", self.resource_url, None, dict(self.headers), self.args.http_timeout
                )
            except HttpFailure as exc:
                log(f"DELETE failed: {exc}")
                self.result["delete_status"] = None
                if self.exit_code == 0:
                    self.exit_code = 2
            else:
                self.result["delete_status"] = status
                log(f"DELETE answered {status}")
                if not 200 <= status < 300:
                    log(f"DELETE body: {data.decode('utf-8', 'replace').strip()[:2000]}")
                    if self.exit_code == 0:
                        self.result["error"] = f"DELETE returned HTTP {status}"
                        self.exit_code = 2


def parse_header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"header must look like 'Name: value', got {text!r}")
    return name.strip(), value.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--offer",
        metavar="URL",
        help="JSON offer/answer endpoint, e.g. http://127.0.0.1:8000/offer",
    )
    mode.add_argument("--whip", metavar="URL", help="WHIP endpoint (RFC 9725)")
    parser.add_argument(
        "--header",
        action="append",
        type=parse_header,
        default=[],
        metavar="'Name: value'",
        help="extra request header (repeatable), e.g. 'Authorization: Bearer X'",
    )
    parser.add_argument("--wav", help="speech to send once connected (any WAV); silence if omitted")
    parser.add_argument(
        "--output", "-o", default="received.wav", help="where to record what is received"
    )
    parser.add_argument(
        "--duration", type=float, default=10.0, help="seconds to stay in the call once connected"
    )
    parser.add_argument(
        "--lead-in", type=float, default=0.5, help="seconds of silence before the speech"
    )
    parser.add_argument(
        "--connect-timeout", type=float, default=20.0, help="seconds to wait for ICE+DTLS"
    )
    parser.add_argument(
        "--gather-timeout", type=float, default=5.0, help="seconds to wait for ICE gathering"
    )
    parser.add_argument("--http-timeout", type=float, default=15.0)
    parser.add_argument(
        "--stun", help="STUN server for webrtcbin, e.g. stun://stun.l.google.com:19302"
    )
    parser.add_argument(
        "--no-verify-fingerprint",
        action="store_true",
        help="do not check the peer's DTLS certificate against the answer's a=fingerprint",
    )
    parser.add_argument(
        "--print-sdp", action="store_true", help="log the offer and answer SDP to stderr"
    )
    args = parser.parse_args()

    Gst.init(None)
    speech = b""
    if args.wav:
        try:
            speech = decode_wav(args.wav)
        except (RuntimeError, GLib.Error) as exc:
            print(f"error: {exc}", file=sys.stderr)  # noqa: T201
            return 1
        log(f"speech: {args.wav} -> {len(speech) / 2 / RATE:.2f} s at 8 kHz mono")
    call = Call(args, speech)
    code = call.run()
    print(json.dumps(call.result), flush=True)  # noqa: T201
    return code


if __name__ == "__main__":
    sys.exit(main())
