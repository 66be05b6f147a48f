// Minimal client: mic -> WebRTC -> server; events on the "oai-events" data channel.
const $ = (id) => document.getElementById(id);
const ui = { connect: $("connect"), disconnect: $("disconnect"), state: $("state"),
  transcript: $("transcript"), latency: $("latency"), error: $("error"), remote: $("remote") };

let pc = null;
let mic = null;
const replies = new Map(); // response_id -> element

function setState(state, label = state) {
  ui.state.dataset.state = state;
  ui.state.textContent = label;
}

function showError(message) {
  ui.error.hidden = !message;
  ui.error.textContent = message || "";
}

function addTurn(role, text) {
  const el = document.createElement("p");
  el.className = `turn ${role}`;
  el.textContent = text;
  ui.transcript.append(el);
  el.scrollIntoView({ block: "end" });
  return el;
}

function onEvent(event) {
  switch (event.type) {
    case "input_audio_buffer.speech_started": setState("user-speaking", "you are speaking"); break;
    case "input_audio_buffer.speech_stopped": setState("thinking"); break;
    case "conversation.item.input_audio_transcription.completed":
      if (event.transcript) addTurn("user", event.transcript);
      break;
    case "response.created": replies.set(event.response.id, null); break;
    case "response.output_audio_transcript.delta": {
      let el = replies.get(event.response_id);
      if (!el) { el = addTurn("assistant", ""); replies.set(event.response_id, el); }
      el.textContent += event.delta;
      setState("speaking");
      break;
    }
    case "response.done": {
      const el = replies.get(event.response.id);
      if (el && event.response.status === "cancelled") el.classList.add("interrupted");
      showLatency(event.response.timings_ms || {});
      setState("listening");
      break;
    }
    case "error": showError(event.error.message); break;
  }
}

function showLatency(timings) {
  const parts = Object.entries(timings).map(([stage, ms]) => `${stage.replaceAll("_", " ")} ${Math.round(ms)} ms`);
  ui.latency.textContent = parts.length ? `Server, from end of speech: ${parts.join(" · ")}` : "";
}

async function connect() {
  showError("");
  ui.connect.disabled = true;
  setState("connecting");
  try {
    const config = await (await fetch("/v1/config")).json();
    mic = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true } });
    pc = new RTCPeerConnection({ iceServers: config.ice_servers });
    mic.getTracks().forEach((track) => pc.addTrack(track, mic));
    pc.ontrack = (e) => { ui.remote.srcObject = e.streams[0] || new MediaStream([e.track]); };
    const channel = pc.createDataChannel("oai-events");
    channel.onmessage = (m) => onEvent(JSON.parse(m.data));
    channel.onopen = () => setState("listening");
    pc.onconnectionstatechange = () => {
      if (pc && ["failed", "closed"].includes(pc.connectionState)) { showError(`connection ${pc.connectionState}`); disconnect(); }
    };
    await pc.setLocalDescription(await pc.createOffer());
    await waitForIce(pc);
    const res = await fetch("/offer", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ sdp: pc.localDescription.sdp, type: "offer" }) });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error ? body.error.message : `server answered ${res.status}`);
    await pc.setRemoteDescription({ type: "answer", sdp: body.sdp });
    ui.disconnect.disabled = false;
  } catch (err) {
    showError(err.name === "NotAllowedError" ? "Microphone permission was denied." : String(err.message || err));
    disconnect();
  }
}

function waitForIce(peer) {
  if (peer.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { if (peer.iceGatheringState === "complete") resolve(); };
    peer.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, 2000); // host candidates are enough on a LAN
  });
}

function disconnect() {
  if (pc) pc.close();
  if (mic) mic.getTracks().forEach((t) => t.stop());
  pc = null; mic = null;
  ui.connect.disabled = false;
  ui.disconnect.disabled = true;
  setState("idle", "disconnected");
}

ui.connect.addEventListener("click", connect);
ui.disconnect.addEventListener("click", disconnect);
