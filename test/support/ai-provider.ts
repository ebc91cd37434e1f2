// A local fake of the AI providers' wire formats, for tests and benches: OpenAI's chat
// completions, completions, embeddings and Responses API, and Anthropic's messages (and token
// counting), as JSON or as their streams, close enough that the official `openai` and
// `@anthropic-ai/sdk` packages read it as they read the real thing. Paths are matched by their
// end, so a gateway route may put any prefix in front (`/v1/...`, Azure's
// `/openai/deployments/<d>/...`).
//
// It behaves as the providers do where tollgate relies on it:
// - it generates at most the output ceiling the request gives (OpenAI `max_completion_tokens`
//   or `max_tokens`, times `n`; Responses `max_output_tokens`; Anthropic `max_tokens`, which it
//   requires as Anthropic does), and without one as much as the test says it would;
// - an OpenAI chat or completions stream carries its usage only when the request asks for it
//   (`stream_options.include_usage: true`), in a last chunk with `choices: []`;
// - it records every request's path, headers and body as received, so a test can read what the
//   gateway forwarded (the ceiling it wrote, include_usage, the credential it set).
// What a request gets beyond that is the test's `behave` (tokens, events, delays, an error).
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type ProviderApi = "chat" | "completion" | "embedding" | "response" | "message" | "count";

export interface Behaviour {
  /** Input tokens it reports (default: the body's bytes / 4, rounded up). */
  prompt?: number;
  /** Of which read from the prompt cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens). */
  cached?: number;
  /** Anthropic cache_creation_input_tokens. */
  cacheWrite?: number;
  /** Output tokens per completion it would generate without a ceiling (default 20). */
  completion?: number;
  /** Content events of a stream before its usage (default 3). */
  events?: number;
  /** Pause between events, ms (default 0). */
  delayMs?: number;
  /** Answer this instead: an HTTP status and the provider's error body. */
  error?: { status: number; type: string; message: string };
  /** Answer the JSON with this Content-Encoding (its body is not really encoded). */
  contentEncoding?: string;
}

export interface ProviderRequest {
  id: number;
  api: ProviderApi;
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  /** The body as received. */
  raw: string;
  body: Record<string, unknown>;
  /** What it generated and reported; undefined before the answer is written, or for an error. */
  usage?: { prompt: number; completion: number; cached: number; cacheWrite: number };
  /** Whether its answer carried the usage (a stream without include_usage does not). */
  reported: boolean;
  /** How the answer ended: written whole, or the peer left first. */
  outcome: Promise<"ended" | "closed">;
}

export interface FakeProvider {
  url: string;
  requests: ProviderRequest[];
  /** What each request gets (set per test; default: the defaults above). */
  behave: (r: ProviderRequest) => Behaviour;
  /**
   * Every request must carry this key (401 otherwise): `Authorization: Bearer <key>` for OpenAI's
   * APIs, `x-api-key: <key>` for Anthropic's; undefined: none needed.
   */
  requireKey: string | undefined;
  /** Tokens generated in all: what the provider would bill. */
  generated(which?: (r: ProviderRequest) => boolean): number;
  close(): Promise<void>;
  server: Server;
}

function apiOf(path: string): ProviderApi | undefined {
  const p = path.toLowerCase().replace(/\/+$/, "");
  if (p.endsWith("/chat/completions")) return "chat";
  if (p.endsWith("/completions")) return "completion";
  if (p.endsWith("/embeddings")) return "embedding";
  if (p.endsWith("/responses")) return "response";
  if (p.endsWith("/messages/count_tokens")) return "count";
  if (p.endsWith("/messages")) return "message";
  return undefined;
}

export async function startFakeProvider(): Promise<FakeProvider> {
  const requests: ProviderRequest[] = [];
  const provider: FakeProvider = {
    url: "",
    requests,
    behave: () => ({}),
    requireKey: undefined,
    generated: (which = () => true) =>
      requests.filter(which).reduce((sum, r) => sum + (r.usage ? r.usage.prompt + r.usage.completion : 0), 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
    server: undefined as unknown as Server,
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0]!;
      const api = apiOf(path);
      const raw = Buffer.concat(chunks).toString("utf8");
      let body: Record<string, unknown> = {};
      try {
        const parsed: unknown = JSON.parse(raw);
        if (parsed && typeof parsed === "object") body = parsed as Record<string, unknown>;
      } catch {
        // An empty or broken body: the error below says so.
      }
      const r: ProviderRequest = {
        id: requests.length + 1,
        api: api ?? "chat",
        path,
        method: req.method ?? "GET",
        headers: req.headers,
        raw,
        body,
        reported: false,
        outcome: Promise.resolve("ended"),
      };
      requests.push(r);
      // As the providers do: Anthropic's key in x-api-key, OpenAI's as a bearer token.
      const anthropic = r.api === "message" || r.api === "count";
      const presented = anthropic ? req.headers["x-api-key"] : req.headers.authorization;
      const wanted = anthropic ? provider.requireKey : `Bearer ${provider.requireKey}`;
      if (provider.requireKey !== undefined && presented !== wanted) {
        errorAnswer(res, 401, "invalid_request_error", "Incorrect API key provided", r.api);
        return;
      }
      if (!api || req.method !== "POST") {
        errorAnswer(res, 404, "not_found_error", `no ${req.method} ${path} here`, "chat");
        return;
      }
      r.outcome = answer(r, provider.behave(r), res);
    });
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  provider.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  provider.server = server;
  return provider;
}

function errorAnswer(res: ServerResponse, status: number, type: string, message: string, api: ProviderApi) {
  const text =
    api === "message" || api === "count"
      ? JSON.stringify({ type: "error", error: { type, message } })
      : JSON.stringify({ error: { message, type, param: null, code: null } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const num = (v: unknown): number | undefined => (typeof v === "number" && v > 0 ? v : undefined);

/** The output ceiling the request gives, per completion, and how many completions. */
function ceilingOf(r: ProviderRequest): { ceiling: number | undefined; n: number } {
  const b = r.body;
  switch (r.api) {
    case "chat":
      return { ceiling: num(b.max_completion_tokens) ?? num(b.max_tokens), n: num(b.n) ?? 1 };
    case "completion":
      return { ceiling: num(b.max_tokens) ?? 16, n: Math.max(num(b.n) ?? 1, num(b.best_of) ?? 1) };
    case "response":
      return { ceiling: num(b.max_output_tokens), n: 1 };
    case "message":
      return { ceiling: num(b.max_tokens), n: 1 };
    default:
      return { ceiling: 0, n: 1 };
  }
}

async function answer(r: ProviderRequest, b: Behaviour, res: ServerResponse): Promise<"ended" | "closed"> {
  if (b.error) {
    errorAnswer(res, b.error.status, b.error.type, b.error.message, r.api);
    return "ended";
  }
  if (r.api === "message" && num(r.body.max_tokens) === undefined) {
    errorAnswer(res, 400, "invalid_request_error", "max_tokens: Field required", r.api);
    return "ended";
  }
  const { ceiling, n } = ceilingOf(r);
  const prompt = b.prompt ?? Math.ceil(Buffer.byteLength(r.raw) / 4);
  const perChoice =
    r.api === "embedding" || r.api === "count" ? 0 : Math.min(b.completion ?? 20, ceiling ?? Infinity);
  const usage = { prompt, completion: perChoice * n, cached: b.cached ?? 0, cacheWrite: b.cacheWrite ?? 0 };
  r.usage = usage;
  const stream = r.body.stream === true;
  let closed = false;
  res.on("close", () => {
    closed = !res.writableFinished;
  });
  const pause = (ms: number) =>
    ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
  if (!stream) {
    const text = JSON.stringify(jsonAnswer(r, usage));
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(text)),
    };
    if (b.contentEncoding) headers["content-encoding"] = b.contentEncoding;
    res.writeHead(200, headers);
    res.end(text);
    r.reported = true;
    return "ended";
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const events = streamEvents(r, usage, b.events ?? 3);
  for (let i = 0; i < events.length; i++) {
    if (closed || res.destroyed) return "closed";
    if (i > 0) await pause(b.delayMs ?? 0);
    if (closed || res.destroyed) return "closed";
    const e = events[i]!;
    res.write(e.text);
    if (e.usage) r.reported = true;
  }
  res.end();
  return "ended";
}

type Usage = NonNullable<ProviderRequest["usage"]>;

function openAiUsage(u: Usage) {
  return {
    prompt_tokens: u.prompt,
    completion_tokens: u.completion,
    total_tokens: u.prompt + u.completion,
    prompt_tokens_details: { cached_tokens: u.cached },
  };
}

function responsesUsage(u: Usage) {
  return {
    input_tokens: u.prompt,
    input_tokens_details: { cached_tokens: u.cached },
    output_tokens: u.completion,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.prompt + u.completion,
  };
}

function anthropicUsage(u: Usage, output: number) {
  return {
    input_tokens: u.prompt,
    cache_creation_input_tokens: u.cacheWrite,
    cache_read_input_tokens: u.cached,
    output_tokens: output,
  };
}

const model = (r: ProviderRequest) => (typeof r.body.model === "string" ? r.body.model : "fake-model");

function jsonAnswer(r: ProviderRequest, u: Usage): Record<string, unknown> {
  const created = 1_700_000_000;
  switch (r.api) {
    case "chat":
      return {
        id: `chatcmpl-${r.id}`,
        object: "chat.completion",
        created,
        model: model(r),
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: "Counted." },
            finish_reason: "stop",
            logprobs: null,
          },
        ],
        usage: openAiUsage(u),
      };
    case "completion":
      return {
        id: `cmpl-${r.id}`,
        object: "text_completion",
        created,
        model: model(r),
        choices: [{ index: 0, text: "Counted.", finish_reason: "stop", logprobs: null }],
        usage: openAiUsage(u),
      };
    case "embedding":
      return {
        object: "list",
        data: [{ object: "embedding", index: 0, embedding: [0.1, 0.2, 0.3] }],
        model: model(r),
        usage: { prompt_tokens: u.prompt, total_tokens: u.prompt },
      };
    case "response":
      return responseObject(r, u, "completed");
    case "message":
      return {
        id: `msg_${r.id}`,
        type: "message",
        role: "assistant",
        model: model(r),
        content: [{ type: "text", text: "Counted." }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: anthropicUsage(u, u.completion),
      };
    case "count":
      return { input_tokens: u.prompt };
  }
}

function responseObject(r: ProviderRequest, u: Usage | null, status: string): Record<string, unknown> {
  return {
    id: `resp_${r.id}`,
    object: "response",
    created_at: 1_700_000_000,
    status,
    model: model(r),
    output:
      status === "completed"
        ? [
            {
              type: "message",
              id: `msg_${r.id}`,
              status: "completed",
              role: "assistant",
              content: [{ type: "output_text", text: "Counted.", annotations: [] }],
            },
          ]
        : [],
    usage: u ? responsesUsage(u) : null,
  };
}

interface StreamEvent {
  text: string;
  /** It carries the answer's usage. */
  usage?: true;
}

const data = (payload: unknown, event?: string): string =>
  `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(payload)}\n\n`;

function streamEvents(r: ProviderRequest, u: Usage, content: number): StreamEvent[] {
  const words = Array.from({ length: Math.max(1, content) }, (_, i) => (i === 0 ? "Counted" : " more"));
  const out: StreamEvent[] = [];
  switch (r.api) {
    case "chat":
    case "completion": {
      const chat = r.api === "chat";
      const base = {
        id: `chatcmpl-${r.id}`,
        object: chat ? "chat.completion.chunk" : "text_completion",
        created: 1_700_000_000,
        model: model(r),
      };
      for (const [i, w] of words.entries())
        out.push({
          text: data({
            ...base,
            choices: [
              chat
                ? {
                    index: 0,
                    delta: i === 0 ? { role: "assistant", content: w } : { content: w },
                    finish_reason: null,
                  }
                : { index: 0, text: w, finish_reason: null },
            ],
          }),
        });
      out.push({
        text: data({
          ...base,
          choices: [
            chat
              ? { index: 0, delta: {}, finish_reason: "stop" }
              : { index: 0, text: "", finish_reason: "stop" },
          ],
        }),
      });
      const options = r.body.stream_options as { include_usage?: unknown } | undefined;
      if (options?.include_usage === true)
        out.push({ text: data({ ...base, choices: [], usage: openAiUsage(u) }), usage: true });
      out.push({ text: "data: [DONE]\n\n" });
      return out;
    }
    case "response": {
      out.push({
        text: data(
          { type: "response.created", response: responseObject(r, null, "in_progress") },
          "response.created",
        ),
      });
      for (const w of words)
        out.push({
          text: data(
            {
              type: "response.output_text.delta",
              item_id: `msg_${r.id}`,
              output_index: 0,
              content_index: 0,
              delta: w,
            },
            "response.output_text.delta",
          ),
        });
      out.push({
        text: data(
          { type: "response.completed", response: responseObject(r, u, "completed") },
          "response.completed",
        ),
        usage: true,
      });
      return out;
    }
    case "message": {
      out.push({
        text: data(
          {
            type: "message_start",
            message: {
              id: `msg_${r.id}`,
              type: "message",
              role: "assistant",
              model: model(r),
              content: [],
              stop_reason: null,
              stop_sequence: null,
              usage: anthropicUsage(u, 1),
            },
          },
          "message_start",
        ),
      });
      out.push({
        text: data(
          { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
          "content_block_start",
        ),
      });
      for (const w of words)
        out.push({
          text: data(
            { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: w } },
            "content_block_delta",
          ),
        });
      out.push({ text: data({ type: "content_block_stop", index: 0 }, "content_block_stop") });
      out.push({
        text: data(
          {
            type: "message_delta",
            delta: { stop_reason: "end_turn", stop_sequence: null },
            usage: { output_tokens: u.completion },
          },
          "message_delta",
        ),
        usage: true,
      });
      out.push({ text: data({ type: "message_stop" }, "message_stop") });
      return out;
    }
    default:
      return [{ text: data(jsonAnswer(r, u)) }];
  }
}
