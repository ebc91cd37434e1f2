// Response bodies as the real APIs send them (shapes from their API references, ids and text
// shortened), for the usage meter tests.
import { DEFAULT_USAGE_FIELDS, type UsageFields } from "../../../src/usage/fields.js";
import { usageMeter } from "../../../src/usage/meter.js";

/** OpenAI chat completion, usage at the end (29 tokens). */
export const OPENAI_JSON = `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4o-2024-08-06",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "Hello! How can I \\"assist\\" you today? {usage: 1}",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 19,
    "completion_tokens": 10,
    "total_tokens": 29,
    "prompt_tokens_details": { "cached_tokens": 0, "audio_tokens": 0 },
    "completion_tokens_details": {
      "reasoning_tokens": 0,
      "audio_tokens": 0,
      "accepted_prediction_tokens": 0,
      "rejected_prediction_tokens": 0
    }
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}
`;

/** The same, compact and with usage first (as some OpenAI-compatible servers order it): 29. */
export const OPENAI_JSON_USAGE_FIRST = JSON.stringify({
  usage: { prompt_tokens: 19, completion_tokens: 10, total_tokens: 29 },
  id: "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  object: "chat.completion",
  choices: [{ index: 0, message: { role: "assistant", content: "Hi" }, finish_reason: "stop" }],
});

const chunk = (choices: string, usage: string) =>
  `data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini",` +
  `"system_fingerprint":"fp_44709d6fcb","choices":${choices},"usage":${usage}}\n\n`;

/** OpenAI chat stream with `stream_options: {include_usage: true}`: usage in a last chunk with no choices (21). */
export const OPENAI_STREAM_EVENTS = [
  chunk(
    `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`,
    "null",
  ),
  chunk(`[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]`, "null"),
  chunk(`[{"index":0,"delta":{"content":"! \\"usage\\": {"},"logprobs":null,"finish_reason":null}]`, "null"),
  chunk(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`, "null"),
  chunk(
    "[]",
    `{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
  ),
  "data: [DONE]\n\n",
];
export const OPENAI_STREAM = OPENAI_STREAM_EVENTS.join("");

/** Anthropic message (12 + 6 = 18). */
export const ANTHROPIC_JSON = JSON.stringify({
  id: "msg_01XFDUDYJgAACzvnptvVoYEL",
  type: "message",
  role: "assistant",
  content: [{ type: "text", text: "Hello!" }],
  model: "claude-sonnet-4-20250514",
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: {
    input_tokens: 12,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: 6,
    service_tier: "standard",
  },
});

/**
 * Anthropic stream: message_start carries the input tokens (and output_tokens: 1), each
 * message_delta the cumulative output tokens (here 10, then 15): 25 + 15 = 40.
 */
export const ANTHROPIC_STREAM_EVENTS = [
  `event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-20250514","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}\n\n`,
  `event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n`,
  `event: ping\ndata: {"type": "ping"}\n\n`,
  `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n`,
  `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}\n\n`,
  `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":10}}\n\n`,
  `event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n`,
  `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}\n\n`,
  `event: message_stop\ndata: {"type":"message_stop"}\n\n`,
];
export const ANTHROPIC_STREAM = ANTHROPIC_STREAM_EVENTS.join("");

/** Responses API stream: `response.completed` carries the whole response, usage included (48). */
export const RESPONSES_STREAM_EVENTS = [
  `event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}}\n\n`,
  `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","output_index":0,"content_index":0,"delta":"Hi there!"}\n\n`,
  `event: response.completed\ndata: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","created_at":1741290958,"status":"completed","model":"gpt-4.1-2025-04-14","output":[{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there!","annotations":[]}]}],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}\n\n`,
];
export const RESPONSES_STREAM = RESPONSES_STREAM_EVENTS.join("");

export const JSON_TYPE = "application/json";
export const SSE_TYPE = "text/event-stream";

/** What a meter reports after the body, fed in the given chunks. */
export function meter(
  type: string,
  chunks: string | Uint8Array | readonly (string | Uint8Array)[],
  fields: UsageFields = DEFAULT_USAGE_FIELDS,
): number | undefined {
  const m = usageMeter(type, fields);
  if (m === null) throw new Error(`no meter for ${type}`);
  for (const part of Array.isArray(chunks) ? chunks : [chunks]) m.write(Buffer.from(part));
  return m.units();
}

/** Splits bytes at the given offsets (any order, duplicates allowed). */
export function splitAt(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => Math.min(c, bytes.length)))].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  let from = 0;
  for (const p of points) {
    parts.push(bytes.subarray(from, p));
    from = p;
  }
  parts.push(bytes.subarray(from));
  return parts;
}
