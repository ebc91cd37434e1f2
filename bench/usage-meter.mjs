// `node bench/usage-meter.mjs` (after `npm run build`): how fast the usage meters read a body, in
// MB/s of one core. The meter runs in the response path on every chunk of a `charge: usage`
// route, so this is the CPU a streamed completion costs beyond forwarding it. Each shape is fed
// in 64 KB chunks, as undici hands them over, after a warm-up pass.
//
//   BENCH_USAGE_MB (200)  the body size per shape
import { DEFAULT_USAGE_FIELDS } from "../dist/usage/fields.js";
import { usageMeter } from "../dist/usage/meter.js";

const MB = Number(process.env.BENCH_USAGE_MB ?? 200);
const CHUNK = 64 * 1024;

function repeatTo(unit, bytes) {
  return Buffer.from(unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes));
}

const word = (i) => ["Hello", " there", ",", " how", " can", " I", " help", " you", " today", "?"][i % 10];
const openaiEvents = Array.from(
  { length: 10 },
  (_, i) =>
    `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,` +
    `"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8",` +
    `"choices":[{"index":0,"delta":{"content":${JSON.stringify(word(i))}},"logprobs":null,"finish_reason":null}],"usage":null}\n\n`,
).join("");
const anthropicEvents = Array.from(
  { length: 10 },
  (_, i) =>
    `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${JSON.stringify(word(i))}}}\n\n`,
).join("");
const longText = 'Lorem ipsum dolor sit amet, \\"consectetur\\" adipiscing elit. '.repeat(20);
const jsonBody = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"${longText}`;

const shapes = [
  ["SSE, OpenAI chat chunks (~280 B events)", "text/event-stream", repeatTo(openaiEvents, MB * 2 ** 20)],
  [
    "SSE, Anthropic text deltas (~130 B events)",
    "text/event-stream",
    repeatTo(anthropicEvents, MB * 2 ** 20),
  ],
  [
    "SSE, one huge event (a long string)",
    "text/event-stream",
    Buffer.concat([Buffer.from('data: {"a":"'), repeatTo(longText, MB * 2 ** 20)]),
  ],
  [
    "JSON, one long content string",
    "application/json",
    Buffer.concat([Buffer.from(jsonBody), repeatTo(longText, MB * 2 ** 20)]),
  ],
];

function run(type, body) {
  const meter = usageMeter(type, DEFAULT_USAGE_FIELDS);
  const start = process.hrtime.bigint();
  for (let at = 0; at < body.length; at += CHUNK) meter.write(body.subarray(at, at + CHUNK));
  return Number(process.hrtime.bigint() - start) / 1e9;
}

for (const [name, type, body] of shapes) {
  run(type, body.subarray(0, 16 * 2 ** 20));
  const seconds = Math.min(run(type, body), run(type, body), run(type, body));
  console.log(`${name.padEnd(46)} ${(body.length / 2 ** 20 / seconds).toFixed(0).padStart(6)} MB/s`);
}
