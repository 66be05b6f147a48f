// The official Agents SDK as a browser page would load it; the tests drive it from window.
import {
  OpenAIRealtimeWebRTC,
  OpenAIRealtimeWebSocket,
  RealtimeAgent,
  RealtimeSession,
  tool,
} from "@openai/agents-realtime";
import { z } from "zod";

window.AgentsRealtime = {
  OpenAIRealtimeWebRTC,
  OpenAIRealtimeWebSocket,
  RealtimeAgent,
  RealtimeSession,
  tool,
  z,
};
