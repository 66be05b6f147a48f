// The page: microphone -> WebRTC -> server, reply audio back, and the server's
// events on the "oai-events" data channel (OpenAI Realtime names).
const $ = (id) => document.getElementById(id);
const ui = {
  connect: $("connect"), disconnect: $("disconnect"), state: $("state"), micSelect: $("mic-select"),
  meterIn: $("meter-in"), meterOut: $("meter-out"), error: $("error"), transcript: $("transcript"),
  latency: $("latency"), remote: $("remote"), voice: $("voice"), speed: $("speed"),
  silence: $("silence"), instructions: $("instructions"), settingsForm: $("settings-form"),
  turnDetection: $("turn-detection"), eagerness: $("eagerness"),
  silenceField: $("silence-field"), eagernessField: $("eagerness-field"),
  settingsStatus: $("settings-status"), iceServers: $("ice-servers"), models: $("models"),
};
const STATE_LABELS = { idle: "disconnected", connecting: "connecting…", listening: "listening",
  "user-speaking": "you are speaking", thinking: "thinking…", speaking: "speaking" };
const RECONNECT_DELAYS_S = [1, 2, 4, 8, 15];
// The server ended the call on purpose: do not dial again by ourselves.
const FINAL_ENDINGS = new Set(["idle_timeout", "session_expired", "hangup"]);
const VOICE_RMS = 0.02; // a level above this counts as someone speaking

let config = null;
let key = null; // a client secret for this page, when the server has an API key
let call = null; // { pc, mic, channel }
let wanted = false; // the user pressed Connect and has not pressed Disconnect
let attempt = 0;
let retryTimer = null;
const replies = new Map(); // response_id -> transcript element
const levels = { in: null, out: null, audio: null, lastVoiceAt: 0 };
const turn = { userEndedAt: null, awaitingVoice: false, v2vMs: null, server: {} };
// What the indicator shows follows these: the user speaking (the server's VAD), reply
// audio the server is sending that is audible here, or an answer owed.
const floor = { userSpeaking: false, audioOut: false, awaiting: false, responses: new Set(), lastOutVoiceAt: 0 };
// How long reply audio may be quiet (between words) and still count as speaking.
const SPEAKING_HOLD_MS = 300;

function showFloor(now = performance.now()) {
  if (!call?.channel || call.channel.readyState !== "open") return;
  if (floor.userSpeaking) setState("user-speaking");
  else if (floor.audioOut && now - floor.lastOutVoiceAt < SPEAKING_HOLD_MS) setState("speaking");
  else if (floor.awaiting || floor.responses.size || floor.audioOut) setState("thinking");
  else setState("listening");
}

function setState(state) {
  if (ui.state.dataset.state === state) return; // asked every 20 ms: only a change is news
  ui.state.dataset.state = state;
  ui.state.textContent = STATE_LABELS[state] || state;
}

function showError(message) {
  ui.error.hidden = !message;
  ui.error.textContent = message || "";
}

function addTurn(role, text) {
  ui.transcript.querySelector(".hint")?.remove();
  const el = document.createElement("p");
  el.className = `turn ${role}`;
  el.textContent = text;
  ui.transcript.append(el);
  el.scrollIntoView({ block: "end", behavior: "smooth" });
  return el;
}

// --- events from the server -------------------------------------------------
function onEvent(event) {
  switch (event.type) {
    case "session.updated":
      ui.settingsStatus.textContent = "Settings applied.";
      showVoice(event.session?.audio?.output?.voice);
      break;
    case "input_audio_buffer.speech_started": floor.userSpeaking = true; break;
    case "input_audio_buffer.speech_stopped":
      // Over a reply, the server holds it until it knows whether this was a turn:
      // a backchannel ("mm-hm") gets no commit, and the reply goes on.
      floor.userSpeaking = false;
      turn.userEndedAt = levels.lastVoiceAt || performance.now();
      break;
    case "input_audio_buffer.committed":
      floor.awaiting = true;
      turn.awaitingVoice = true;
      break;
    case "response.created":
      floor.awaiting = false;
      floor.responses.add(event.response.id);
      break;
    case "conversation.item.input_audio_transcription.completed":
      if (event.transcript) addTurn("user", event.transcript);
      else floor.awaiting = false; // nothing to answer: no response follows
      break;
    case "output_audio_buffer.started": floor.audioOut = true; break;
    case "output_audio_buffer.stopped": case "output_audio_buffer.cleared":
      floor.audioOut = false;
      break;
    case "response.output_audio_transcript.delta": {
      let el = replies.get(event.response_id);
      if (!el) { el = addTurn("assistant", ""); replies.set(event.response_id, el); }
      el.textContent += event.delta;
      break;
    }
    case "response.done": {
      floor.responses.delete(event.response.id);
      floor.audioOut = false;
      const el = replies.get(event.response.id);
      if (el && event.response.status === "cancelled") {
        el.classList.add("interrupted");
        el.title = "You interrupted this reply; only what you heard is kept.";
      }
      turn.server = event.response.timings_ms || {};
      showLatency();
      break;
    }
    case "error": onServerError(event.error); break;
  }
  showFloor();
}

function onServerError(error) {
  if (FINAL_ENDINGS.has(error.code)) wanted = false;
  showError(error.message);
}

function showLatency() {
  const parts = [];
  if (turn.v2vMs !== null) parts.push(`<strong>voice to voice ${(turn.v2vMs / 1000).toFixed(2)} s</strong> (measured here)`);
  const stages = Object.entries(turn.server).map(([stage, ms]) => `${stage.replaceAll("_", " ")} ${Math.round(ms)} ms`);
  if (stages.length) parts.push(`server, from end of speech: ${stages.join(" · ")}`);
  ui.latency.innerHTML = parts.join("<br>");
}

// --- level meters (WebAudio AnalyserNode) ----------------------------------
function analyser(stream) {
  levels.audio = levels.audio || new AudioContext();
  const node = levels.audio.createAnalyser();
  node.fftSize = 1024;
  levels.audio.createMediaStreamSource(stream).connect(node);
  return node;
}

function rms(node) {
  if (!node) return 0;
  const data = new Float32Array(node.fftSize);
  node.getFloatTimeDomainData(data);
  return Math.sqrt(data.reduce((sum, x) => sum + x * x, 0) / data.length);
}

function showLevel(meter, level) {
  meter.value = Math.min(1, level * 4);
  meter.dataset.peak = Math.max(Number(meter.dataset.peak), level).toFixed(4);
}

setInterval(() => {
  const now = performance.now();
  const input = rms(levels.in), output = rms(levels.out);
  showLevel(ui.meterIn, input);
  showLevel(ui.meterOut, output);
  if (input > VOICE_RMS) levels.lastVoiceAt = now;
  if (output > VOICE_RMS) floor.lastOutVoiceAt = now;
  showFloor(now);
  if (turn.awaitingVoice && output > VOICE_RMS) {
    turn.awaitingVoice = false;
    turn.v2vMs = now - turn.userEndedAt;
    showLatency();
  }
}, 20);

// --- connecting -------------------------------------------------------------
async function loadConfig() {
  config = await (await fetch("/v1/config")).json();
  ui.voice.replaceChildren(...config.voices.map((name) => new Option(name, name, false, name === config.voice)));
  ui.speed.value = config.speed;
  ui.silence.value = config.vad.silence_ms;
  // With an API key set, the server keeps its system prompt to itself: left empty, the
  // session keeps it.
  ui.instructions.value = config.instructions ?? "";
  const semantic = ui.turnDetection.querySelector('option[value="semantic_vad"]');
  semantic.disabled = !config.turn.semantic_vad;
  ui.turnDetection.value = config.turn.semantic_vad ? config.turn.detection : "server_vad";
  ui.eagerness.value = config.turn.eagerness;
  showTurnFields();
  const urls = config.ice_servers.map((server) => server.urls);
  if (urls.length) ui.iceServers.textContent = urls.join(", ");
  showModels(config.models);
}

// What the agent runs on, and a word when its LLM is the small one that ships with it.
function showModels(models) {
  if (!models?.llm) return;
  ui.models.textContent = `Listening with ${models.stt}, thinking with ${models.llm}, speaking with `;
  const voice = document.createElement("span");
  voice.id = "voice-in-use";
  ui.models.append(`${models.tts}, voice `, voice, ".");
  showVoice(config.voice);
  if (models.demo) {
    ui.models.append(" The LLM is the small demo model that runs on this CPU: expect wrong answers."
      + " For better ones, point VOICE_LLM__BASE_URL at a larger model served by vLLM on a GPU.");
  }
  ui.models.hidden = false;
}

// The voice the session speaks with, as the server last said (session.updated).
function showVoice(voice) {
  const el = $("voice-in-use");
  if (el && voice) el.textContent = voice;
}

async function openMic() {
  const deviceId = ui.micSelect.value;
  return navigator.mediaDevices.getUserMedia({
    audio: { echoCancellation: true, noiseSuppression: true, ...(deviceId ? { deviceId: { exact: deviceId } } : {}) },
  });
}

async function listMics() {
  const chosen = ui.micSelect.value;
  const mics = (await navigator.mediaDevices.enumerateDevices()).filter((d) => d.kind === "audioinput");
  ui.micSelect.replaceChildren(new Option("default", ""),
    ...mics.filter((d) => d.deviceId && d.deviceId !== "default")
      .map((d, i) => new Option(d.label || `microphone ${i + 1}`, d.deviceId, false, d.deviceId === chosen)));
}

async function connect() {
  clearTimeout(retryTimer);
  wanted = true;
  showError("");
  ui.connect.disabled = true;
  ui.disconnect.disabled = false;
  setState("connecting");
  try {
    if (!config?.models?.llm) await loadConfig();  // opened while the models loaded
    const mic = await openMic();
    await listMics();
    const pc = new RTCPeerConnection({ iceServers: config.ice_servers });
    call = { pc, mic, channel: null };
    mic.getTracks().forEach((track) => pc.addTrack(track, mic));
    levels.in = analyser(mic);
    pc.ontrack = (e) => {
      const stream = e.streams[0] || new MediaStream([e.track]);
      ui.remote.srcObject = stream; // Chrome feeds WebAudio from a remote track only while it plays
      levels.out = analyser(stream);
    };
    const channel = pc.createDataChannel("oai-events");
    call.channel = channel;
    channel.onmessage = (m) => onEvent(JSON.parse(m.data));
    channel.onopen = () => { attempt = 0; setState("listening"); sendSettings(); };
    channel.onclose = () => { if (call && call.channel === channel) dropped("the connection to the server closed"); };
    pc.onconnectionstatechange = () => {
      if (call?.pc === pc && pc.connectionState === "failed") dropped("the connection failed (ICE): check the network or the TURN settings");
    };
    await pc.setLocalDescription(await pc.createOffer());
    await waitForIce(pc);
    const offer = JSON.stringify({ sdp: pc.localDescription.sdp, type: "offer" });
    let res = await postOffer(offer);
    if (res.status === 401 && (key = await pageKey())) res = await postOffer(offer);
    const body = await res.json().catch(() => ({}));
    if (res.status === 401) {
      wanted = false;
      teardown();
      return showError("This server needs an API key, and gives the page none: ask its operator.");
    }
    const wait = Number(res.headers.get("Retry-After")) || 2;
    if (res.status === 503 && body.error?.type === "session_limit_reached") return busy(wait);
    // This address holds its share of the slots, or calls too fast: said once, one time.
    if (res.status === 429) return busy(wait, (body.error?.message ?? "Too many calls").split(";")[0]);
    if (!res.ok) throw new Error(body.error ? body.error.message : `the server answered ${res.status}`);
    await pc.setRemoteDescription({ type: "answer", sdp: body.sdp });
  } catch (err) {
    if (err.name === "NotAllowedError") {
      wanted = false;
      teardown();
      return showError("Microphone permission was denied. Allow it for this site in the browser's settings, then press Connect.");
    }
    if (err.name === "NotFoundError") { wanted = false; teardown(); return showError("No microphone was found."); }
    if (err instanceof TypeError) return dropped("cannot reach the server");
    dropped(String(err.message || err));
  }
}

function postOffer(offer) {
  const headers = { "Content-Type": "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  return fetch("/offer", { method: "POST", headers, body: offer });
}

// A server with an API key may hand the page a short-lived client secret
// (server.page_client_secrets, behind the deployment's own login).
async function pageKey() {
  const res = await fetch("/v1/page/client_secret", { method: "POST" }).catch(() => null);
  return res?.ok ? (await res.json()).value : null;
}

// Waiting to dial again: Connect stays pressed, Disconnect gives up.
function waiting() {
  setState("connecting");
  ui.connect.disabled = true;
  ui.disconnect.disabled = false;
}

function busy(waitS, why) {
  teardown();
  waiting();
  const all = config.max_sessions === 1 ? "The one conversation this server takes is" : `All ${config.max_sessions} conversations are`;
  showError(`${why ?? `${all} busy`}; trying again in ${waitS} s.`);
  retryTimer = setTimeout(() => { if (wanted) connect(); }, waitS * 1000);
}

// The call broke (or could not start): say why, then try again while the user wants it.
function dropped(reason) {
  teardown();
  if (!wanted) return;
  const delay = RECONNECT_DELAYS_S[Math.min(attempt, RECONNECT_DELAYS_S.length - 1)];
  attempt += 1;
  showError(`${reason[0].toUpperCase()}${reason.slice(1)}; reconnecting in ${delay} s.`);
  waiting();
  retryTimer = setTimeout(() => { if (wanted) connect(); }, delay * 1000);
}

function waitForIce(peer) {
  if (peer.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    peer.addEventListener("icegatheringstatechange", () => { if (peer.iceGatheringState === "complete") resolve(); });
    setTimeout(resolve, 2000); // host candidates are enough on a LAN
  });
}

function teardown() {
  const old = call;
  call = null;
  if (old) {
    old.pc.close();
    old.mic.getTracks().forEach((t) => t.stop());
  }
  levels.in = levels.out = null;
  turn.awaitingVoice = false;
  Object.assign(floor, { userSpeaking: false, audioOut: false, awaiting: false });
  floor.responses.clear();
  ui.connect.disabled = false;
  ui.disconnect.disabled = true;
  setState("idle");
}

function disconnect() {
  wanted = false;
  clearTimeout(retryTimer);
  teardown();
  showError("");
}

// --- settings and devices ---------------------------------------------------
function settings() {
  const turnDetection = ui.turnDetection.value === "semantic_vad"
    ? { type: "semantic_vad", eagerness: ui.eagerness.value }
    : { type: "server_vad", silence_duration_ms: Number(ui.silence.value) };
  return {
    type: "realtime",
    ...(config.instructions !== undefined || ui.instructions.value
      ? { instructions: ui.instructions.value } : {}),
    audio: {
      output: { voice: ui.voice.value, speed: Number(ui.speed.value) },
      input: { turn_detection: turnDetection },
    },
  };
}

function showTurnFields() {
  const semantic = ui.turnDetection.value === "semantic_vad";
  ui.silenceField.hidden = semantic;
  ui.eagernessField.hidden = !semantic;
}

function sendSettings() {
  if (call?.channel?.readyState !== "open") {
    ui.settingsStatus.textContent = "Saved; sent when you connect.";
    return;
  }
  ui.settingsStatus.textContent = "Applying…";
  call.channel.send(JSON.stringify({ type: "session.update", session: settings() }));
}

async function switchMic() {
  if (!call) return;
  try {
    const mic = await openMic();
    const sender = call.pc.getSenders().find((s) => s.track?.kind === "audio");
    await sender.replaceTrack(mic.getAudioTracks()[0]);
    call.mic.getTracks().forEach((t) => t.stop());
    call.mic = mic;
    levels.in = analyser(mic);
  } catch (err) {
    showError(`Could not switch microphone: ${err.message || err}`);
  }
}

ui.connect.addEventListener("click", connect);
ui.disconnect.addEventListener("click", disconnect);
ui.micSelect.addEventListener("change", switchMic);
ui.settingsForm.addEventListener("submit", (e) => { e.preventDefault(); sendSettings(); });
ui.turnDetection.addEventListener("change", showTurnFields);
loadConfig().catch(() => showError("Cannot reach the server."));
