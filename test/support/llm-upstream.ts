// A local LLM upstream for tests and benches: OpenAI-style `POST …/chat/completions` and
// Anthropic-style `POST …/messages`, answering JSON, or a text/event-stream when the body says
// `"stream": true`, with the usage the request asks for, and hostile answers on demand. Paths
// are matched by their end, so gateway routes may put any prefix in front (/h/v1/chat/completions).
//
// Each request chooses its answer with headers (or the same names, without `x-test-`, in an
// `x_test` object of its JSON body; a header wins):
//   x-test-tokens        "<prompt>,<completion>" (default 10,20)
//   x-test-events        content events before the usage (default 3)
//   x-test-delay-ms      pause between events (default 0); the first leaves with the head
//   x-test-linger-ms     pause after the usage event, before the end (default 0)
//   x-test-mode          normal | negative (-5) | huge (1000000000000) | exponent (1e12 as written)
//                        | nan (NaN as text) | string ("30") | truncate (the socket is destroyed in
//                        the middle of the usage event) | flood (x-test-flood-mb of events first)
//   x-test-flood-mb      size of a flood, in MB (default 100)
//   x-test-cost          Tollgate-Cost: N in the response head
//   x-test-cost-trailer  Tollgate-Cost: N as an HTTP/1.1 trailer (chunked, `Trailer: Tollgate-Cost`)
// Every event written carries `sent_at`, the epoch time in ms (sub-ms, performance.timeOrigin +
// performance.now(), comparable across processes of one machine) when it was written, and the
// exchange records the same times: a reader subtracts it from its arrival time. Node built-ins
// only: bench/ai-stream.mjs transpiles this file and runs it as it is.
import {
  type Agent,
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";

export type LlmMode = "normal" | "negative" | "huge" | "exponent" | "nan" | "string" | "truncate" | "flood";
const MODES: readonly LlmMode[] = [
  "normal",
  "negative",
  "huge",
  "exponent",
  "nan",
  "string",
  "truncate",
  "flood",
];

export interface LlmOptions {
  prompt: number;
  completion: number;
  events: number;
  delayMs: number;
  lingerMs: number;
  mode: LlmMode;
  floodMb: number;
  cost: string | undefined;
  costTrailer: string | undefined;
}

export interface LlmExchange {
  id: number;
  api: "openai" | "anthropic";
  path: string;
  /** The request's headers (a gateway's Tollgate-Client and Tollgate-Tenant among them). */
  headers: IncomingMessage["headers"];
  stream: boolean;
  options: LlmOptions;
  /** When each event (or the JSON body) was written, epoch ms; a flood records its first and last. */
  sentAt: number[];
  /** prompt + completion once a valid usage was written whole; undefined otherwise (hostile modes too). */
  reported: number | undefined;
  /** Response bytes written. */
  bytes: number;
  /** ended: written to the end; cut: this upstream destroyed it (truncate); closed: the peer left first. */
  outcome: Promise<"ended" | "cut" | "closed">;
}

export interface LlmUpstream {
  url: string;
  port: number;
  exchanges: LlmExchange[];
  /** The sum of `reported` over the exchanges that `which` keeps. */
  reportedSum(which?: (e: LlmExchange) => boolean): number;
  close(): Promise<void>;
  server: Server;
}

/** Epoch ms with the monotonic clock's resolution. */
export const epochMs = (): number => performance.timeOrigin + performance.now();

export async function startLlmUpstream(port = 0): Promise<LlmUpstream> {
  const exchanges: LlmExchange[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0]!;
      const api = path.endsWith("/chat/completions")
        ? "openai"
        : path.endsWith("/messages")
          ? "anthropic"
          : undefined;
      if (req.method !== "POST" || !api) {
        const text = JSON.stringify({
          error: { message: `no ${req.method} ${path} here`, type: "not_found" },
        });
        res.writeHead(404, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      const body = parseBody(Buffer.concat(chunks).toString("utf8"));
      const exchange: LlmExchange = {
        id: exchanges.length + 1,
        api,
        path,
        headers: req.headers,
        stream: body.stream === true,
        options: optionsOf(req, body),
        sentAt: [],
        reported: undefined,
        bytes: 0,
        outcome: Promise.resolve("ended"),
      };
      exchanges.push(exchange);
      exchange.outcome = answer(exchange, res);
    });
  });
  // Keep-alive sockets of a gateway's pool must not hold close() up.
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    exchanges,
    server,
    reportedSum: (which = () => true) =>
      exchanges.filter(which).reduce((sum, e) => sum + (e.reported ?? 0), 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function parseBody(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed && typeof parsed === "object" ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function optionsOf(req: IncomingMessage, body: Record<string, unknown>): LlmOptions {
  const fromBody = (body.x_test && typeof body.x_test === "object" ? body.x_test : {}) as Record<
    string,
    unknown
  >;
  const option = (name: string): string | undefined => {
    const header = req.headers[`x-test-${name}`];
    if (typeof header === "string") return header;
    const value = fromBody[name];
    return value === undefined ? undefined : String(value);
  };
  const int = (name: string, fallback: number) => {
    const n = Number(option(name));
    return Number.isFinite(n) && option(name) !== undefined ? n : fallback;
  };
  const [prompt, completion] = (option("tokens") ?? "10,20").split(",").map(Number);
  const mode = (option("mode") ?? "normal") as LlmMode;
  return {
    prompt: prompt ?? 10,
    completion: completion ?? 20,
    events: int("events", 3),
    delayMs: int("delay-ms", 0),
    lingerMs: int("linger-ms", 0),
    mode: MODES.includes(mode) ? mode : "normal",
    floodMb: int("flood-mb", 100),
    cost: option("cost"),
    costTrailer: option("cost-trailer"),
  };
}

/** A usage number as the mode writes it: the honest value, or the hostile text in its place. */
function usageText(mode: LlmMode, honest: number): string {
  switch (mode) {
    case "negative":
      return "-5";
    case "huge":
      return JSON.stringify(1e12);
    case "exponent":
      return "1e12";
    case "nan":
      return "NaN";
    case "string":
      return JSON.stringify(String(honest));
    default:
      return String(honest);
  }
}

const honest = (mode: LlmMode) => mode === "normal" || mode === "flood";

/** Writes the answer; resolves with how the response ended. */
async function answer(x: LlmExchange, res: ServerResponse): Promise<"ended" | "cut" | "closed"> {
  const o = x.options;
  let closed = false;
  const gone = new Promise<void>((resolve) =>
    res.on("close", () => {
      closed = !res.writableFinished;
      resolve();
    }),
  );
  /** Writes `text`, waiting out backpressure; false once the peer has left. */
  const write = async (text: string, stamp = true): Promise<boolean> => {
    if (closed || res.destroyed) return false;
    if (stamp) x.sentAt.push(epochMs());
    x.bytes += Buffer.byteLength(text);
    if (!res.write(text)) await Promise.race([new Promise((r) => res.once("drain", r)), gone]);
    return !closed && !res.destroyed;
  };
  /** Writes `part`, and once it has left (the callback), destroys the socket: an event cut in two. */
  const cut = async (part: string) => {
    x.sentAt.push(epochMs());
    x.bytes += Buffer.byteLength(part);
    await new Promise<void>((resolve) => res.write(part, () => resolve()));
    res.socket?.destroy();
  };
  const pause = (ms: number) =>
    ms > 0 ? Promise.race([new Promise((r) => setTimeout(r, ms)), gone]) : Promise.resolve();

  const headers: Record<string, string> = {
    "content-type": x.stream ? "text/event-stream" : "application/json",
    "cache-control": "no-cache",
  };
  if (o.cost !== undefined) headers["tollgate-cost"] = o.cost;
  if (o.costTrailer !== undefined) headers.trailer = "Tollgate-Cost";
  const finish = () => {
    if (o.costTrailer !== undefined) res.addTrailers({ "Tollgate-Cost": o.costTrailer });
    res.end();
    return "ended" as const;
  };

  if (!x.stream) {
    const text = jsonBody(x);
    // A trailer needs chunked framing: no content-length then.
    if (o.costTrailer === undefined) headers["content-length"] = String(Buffer.byteLength(text));
    res.writeHead(200, headers);
    if (o.mode === "truncate") {
      await cut(text.slice(0, Math.floor(text.length / 2)));
      return "cut";
    }
    await write(text);
    if (honest(o.mode)) x.reported = o.prompt + o.completion;
    return finish();
  }

  res.writeHead(200, headers);
  const events = x.api === "openai" ? openAiEvents(x) : anthropicEvents(x);
  // Content events first (a flood after the first), each after the delay (the first with the head).
  const count = Math.max(1, o.events);
  for (let i = 0; i < count; i++) {
    if (i > 0) await pause(o.delayMs);
    if (!(await write(events.content(i)))) return "closed";
    if (i === 0 && o.mode === "flood" && !(await flood(x, write))) return "closed";
  }
  await pause(o.delayMs);
  if (closed) return "closed";
  if (o.mode === "truncate") {
    // Part of the usage event, then the connection is gone: no blank line, no end.
    const usage = events.usage();
    await cut(usage.slice(0, Math.floor(usage.length * 0.6)));
    return "cut";
  }
  if (!(await write(events.usage()))) return "closed";
  if (honest(o.mode)) x.reported = o.prompt + o.completion;
  await pause(o.lingerMs);
  if (!(await write(events.tail()))) return "closed";
  return finish();
}

/** `floodMb` MB of content events of about 1 kB each, written 64 at a time. */
async function flood(x: LlmExchange, write: (text: string, stamp?: boolean) => Promise<boolean>) {
  const one =
    x.api === "openai"
      ? sse({
          id: "chatcmpl-flood",
          object: "chat.completion.chunk",
          choices: [{ index: 0, delta: { content: "x".repeat(900) }, finish_reason: null }],
        })
      : sse(
          { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "x".repeat(900) } },
          "content_block_delta",
        );
  const batch = one.repeat(64);
  const batches = Math.ceil((x.options.floodMb * 1024 * 1024) / batch.length);
  for (let i = 0; i < batches; i++) if (!(await write(batch, i === 0 || i === batches - 1))) return false;
  return true;
}

function sse(data: Record<string, unknown>, event?: string): string {
  return `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify({ ...data, sent_at: epochMs() })}\n\n`;
}

const WORDS = ["Tokens", " are", " counted", " at", " the", " end", "."];

/** A stream's events, each built when it is written (so its `sent_at` is its write time). */
interface StreamEvents {
  content(i: number): string;
  usage(): string;
  tail(): string;
}

function openAiEvents(x: LlmExchange): StreamEvents {
  const o = x.options;
  const id = `chatcmpl-${x.id}`;
  const base = { id, object: "chat.completion.chunk", created: 1_700_000_000, model: "fake-model" };
  const u = (n: number) => usageText(o.mode, n);
  return {
    content: (i) =>
      sse({
        ...base,
        choices: [
          {
            index: 0,
            delta: i === 0 ? { role: "assistant", content: "" } : { content: WORDS[i % WORDS.length] },
            finish_reason: null,
          },
        ],
      }),
    // Written by hand: the hostile modes put text there that JSON.stringify would not write.
    usage: () =>
      `data: {"id":"${id}","object":"chat.completion.chunk","created":1700000000,"model":"fake-model","choices":[],"usage":{"prompt_tokens":${u(o.prompt)},"completion_tokens":${u(o.completion)},"total_tokens":${u(o.prompt + o.completion)}},"sent_at":${epochMs()}}\n\n`,
    tail: () => "data: [DONE]\n\n",
  };
}

/** message_start (input_tokens), content_block_delta…, message_delta (output_tokens), message_stop. */
function anthropicEvents(x: LlmExchange): StreamEvents {
  const o = x.options;
  const u = (n: number) => usageText(o.mode, n);
  return {
    content: (i) =>
      i === 0
        ? `event: message_start\ndata: {"type":"message_start","message":{"id":"msg_${x.id}","type":"message","role":"assistant","content":[],"model":"fake-model","stop_reason":null,"usage":{"input_tokens":${u(o.prompt)},"output_tokens":1}},"sent_at":${epochMs()}}\n\n`
        : sse(
            {
              type: "content_block_delta",
              index: 0,
              delta: { type: "text_delta", text: WORDS[i % WORDS.length] },
            },
            "content_block_delta",
          ),
    usage: () =>
      `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":${u(o.completion)}},"sent_at":${epochMs()}}\n\n`,
    tail: () => sse({ type: "message_stop" }, "message_stop"),
  };
}

function jsonBody(x: LlmExchange): string {
  const o = x.options;
  const u = (n: number) => usageText(o.mode, n);
  const sent = epochMs();
  if (x.api === "openai")
    return `{"id":"chatcmpl-${x.id}","object":"chat.completion","created":1700000000,"model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":"Tokens are counted at the end."},"finish_reason":"stop"}],"usage":{"prompt_tokens":${u(o.prompt)},"completion_tokens":${u(o.completion)},"total_tokens":${u(o.prompt + o.completion)}},"sent_at":${sent}}`;
  return `{"id":"msg_${x.id}","type":"message","role":"assistant","content":[{"type":"text","text":"Tokens are counted at the end."}],"model":"fake-model","stop_reason":"end_turn","usage":{"input_tokens":${u(o.prompt)},"output_tokens":${u(o.completion)}},"sent_at":${sent}}`;
}

export interface ReceivedEvent {
  /** The event's data lines, joined. */
  data: string;
  /** `sent_at` of the data (NaN when it has none or is not JSON). */
  sentAt: number;
  /** Epoch ms when the chunk that completed the event arrived. */
  arrivedAt: number;
}

export interface StreamReply {
  status: number;
  headers: IncomingMessage["headers"];
  events: ReceivedEvent[];
  /** The body, when `keepBody` (else ""). */
  body: string;
  bytes: number;
  /** The body arrived to its end; false: the connection was cut (or we left). */
  complete: boolean;
}

export interface StreamRequest {
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
  agent?: Agent | false;
  /** Keep the body text (off for floods). */
  keepBody?: boolean;
  /** Called per complete event: true destroys the request there (a client that leaves). */
  leaveWhen?: (event: ReceivedEvent, index: number) => boolean;
  timeoutMs?: number;
}

/**
 * POSTs to `base + path` and reads the answer as it arrives: each server-sent event with its
 * arrival time. Resolves once the response ended, was cut, or `leaveWhen` left it; rejects only
 * when no response head came.
 */
export function readStream(base: string, r: StreamRequest): Promise<StreamReply> {
  const url = new URL(base);
  const payload = typeof r.body === "string" ? r.body : JSON.stringify(r.body ?? {});
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: "POST",
        path: r.path,
        agent: r.agent ?? false,
        timeout: r.timeoutMs ?? 30_000,
        headers: { "content-type": "application/json", ...r.headers },
      },
      (res) => {
        const reply: StreamReply = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          events: [],
          body: "",
          bytes: 0,
          complete: false,
        };
        let pending = "";
        let left = false;
        res.on("data", (chunk: Buffer) => {
          const arrivedAt = epochMs();
          reply.bytes += chunk.length;
          const text = chunk.toString("utf8");
          if (r.keepBody) reply.body += text;
          if (left) return;
          // Events end at a blank line; only the unfinished tail is kept.
          pending += text;
          let end = pending.indexOf("\n\n");
          while (end !== -1 && !left) {
            const block = pending.slice(0, end);
            pending = pending.slice(end + 2);
            end = pending.indexOf("\n\n");
            const data = block
              .split("\n")
              .filter((l) => l.startsWith("data:"))
              .map((l) => l.slice(5).trimStart())
              .join("\n");
            const event = { data, sentAt: sentAtOf(data), arrivedAt };
            reply.events.push(event);
            if (r.leaveWhen?.(event, reply.events.length - 1)) {
              left = true;
              req.destroy();
              resolve(reply);
            }
          }
          if (pending.length > 1 << 20) pending = pending.slice(-1024); // a flood's events are small
        });
        res.on("end", () => {
          reply.complete = true;
        });
        res.on("error", () => {});
        res.on("close", () => resolve(reply));
      },
    );
    req.on("timeout", () => req.destroy(new Error("stream request timed out")));
    req.on("error", reject);
    req.end(payload);
  });
}

function sentAtOf(data: string): number {
  const m = /"sent_at":(\d+(?:\.\d+)?)/.exec(data);
  return m ? Number(m[1]) : Number.NaN;
}
