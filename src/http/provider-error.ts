// A refusal in the error shape of the API an AI route stands in front of, so the provider's own
// SDKs read it as they read the provider's: the OpenAI and Responses shape
// `{"error":{"message","type","param","code"}}`, Anthropic's `{"type":"error","error":{"type",
// "message"}}`. The SDKs surface `error.message` (and OpenAI's `type` and `code`); a problem+json
// body has none of them, and `openai` then throws "429 status code (no body)". The message is
// the problem's detail: what refused, what is left, when it resets. The problem's extension
// members (`violated-policies`, `retry_after_seconds`, `retry_at`) ride along in the error object.
import type { ServerResponse } from "node:http";
import type { AiFormat } from "../ai/settings.js";
import type { Problem } from "./problem.js";

/** What a 429 refused: a budget or quota (insufficient_quota), or a rate (rate_limit_exceeded). */
export type RefusedFor = "quota" | "rate";

/** OpenAI's error type for a status. */
function openAiType(status: number, refused: RefusedFor | undefined): string {
  if (status === 429) return refused === "quota" ? "insufficient_quota" : "rate_limit_exceeded";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/** OpenAI's error code: its own for what it has one for, else the gateway's problem code. */
function openAiCode(status: number, refused: RefusedFor | undefined, code: string): string {
  if (status === 429) return refused === "quota" ? "insufficient_quota" : "rate_limit_exceeded";
  if (status === 401) return "invalid_api_key";
  return code;
}

/** Anthropic's error type for a status. */
function anthropicType(status: number): string {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

/** The problem's members beyond RFC 9457's own, for the error object. */
function extensions(problem: Problem): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key in problem)
    if (key !== "type" && key !== "title" && key !== "status" && key !== "detail") out[key] = problem[key];
  return out;
}

/** The provider's error body for `problem` (`code`: the gateway's problem code). */
export function providerErrorBody(
  format: AiFormat,
  problem: Problem,
  code: string,
  refused?: RefusedFor,
): string {
  const more = extensions(problem);
  if (format === "anthropic")
    return JSON.stringify({
      type: "error",
      error: { type: anthropicType(problem.status), message: problem.detail, ...more },
    });
  return JSON.stringify({
    error: {
      message: problem.detail,
      type: openAiType(problem.status, refused),
      param: null,
      code: openAiCode(problem.status, refused, code),
      ...more,
    },
  });
}

/** Answers with the provider's error body (application/json), the headers given on top. */
export function sendProviderError(
  res: ServerResponse,
  format: AiFormat,
  problem: Problem,
  code: string,
  headers: Record<string, string | number>,
  refused?: RefusedFor,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = providerErrorBody(format, problem, code, refused);
  const out: Record<string, string | number> = Object.assign({}, headers);
  out["content-type"] = "application/json";
  out["content-length"] = Buffer.byteLength(body);
  out["cache-control"] = "no-store";
  try {
    res.writeHead(problem.status, out);
  } catch {
    res.writeHead(problem.status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
  }
  res.end(body);
}
