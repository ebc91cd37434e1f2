// `tollgate keys …`, `overrides …`, `callers`, `denials`, `usage CALLER`, `reset`, `reload` and
// `config`: words → one admin API request → what it printed,
// and the exit status. Output goes through `io`, so the whole command runs in a unit test with a
// fake transport. Exit statuses follow the gateway's own flags (64 bad usage, 2 a setting to fix):
// 0 done; 1 the admin API refused, failed or could not be reached; 2 TOLLGATE_ADMIN_URL or
// TOLLGATE_ADMIN_TOKEN missing or unusable; 64 bad usage.
import { parseAdminCommand } from "./admin-args.js";
import { type AdminReply, adminTarget, callAdmin, type Transport } from "./admin-client.js";
import { formatAnswer, printable } from "./admin-output.js";

export const EXIT_OK = 0;
export const EXIT_REFUSED = 1;
export const EXIT_ENVIRONMENT = 2;
export const EXIT_USAGE = 64;

export interface AdminIo {
  env: Readonly<Record<string, string | undefined>>;
  stdout(text: string): void;
  stderr(text: string): void;
  /** Default: undici's request. */
  transport?: Transport;
  timeoutMs?: number;
}

/** `argv` as given after `tollgate`, its first word one of ADMIN_GROUPS; resolves to the exit status. */
export async function runAdminCommand(argv: readonly string[], io: AdminIo): Promise<number> {
  const parsed = parseAdminCommand(argv);
  if (parsed.kind === "help") {
    io.stdout(parsed.text);
    return EXIT_OK;
  }
  if (parsed.kind === "usage") {
    io.stderr(parsed.message);
    return EXIT_USAGE;
  }
  const { command } = parsed;
  const say = (line: string) => io.stderr(`tollgate ${command.name}: ${line}\n`);
  const found = adminTarget(io.env);
  if (!found.ok) {
    for (const problem of found.problems) say(problem);
    return EXIT_ENVIRONMENT;
  }
  const where = found.target.base;
  const reply = await callAdmin(found.target, command.request, {
    transport: io.transport,
    timeoutMs: io.timeoutMs,
  });
  if (reply.kind === "unreachable") {
    say(`cannot reach the admin API at ${where}: ${reply.why}`);
    return EXIT_REFUSED;
  }
  if (reply.status < 200 || reply.status > 299) {
    say(refusal(reply));
    return EXIT_REFUSED;
  }
  if (command.json) {
    io.stdout(reply.text.endsWith("\n") ? reply.text : `${reply.text}\n`);
    return EXIT_OK;
  }
  let body: unknown;
  try {
    body = JSON.parse(reply.text);
  } catch {
    body = undefined;
  }
  const printed =
    body === undefined ? { unreadable: "not as JSON" } : formatAnswer(command.shape, reply.status, body);
  if ("unreadable" in printed) {
    say(
      `the admin API at ${where} answered ${reply.status}, ${printed.unreadable}: is it a tollgate of this version? (--json prints the answer as it is)`,
    );
    return EXIT_REFUSED;
  }
  io.stdout(printed.stdout);
  if (printed.stderr) io.stderr(printed.stderr);
  return EXIT_OK;
}

/**
 * An answer other than 2xx in one line: the problem's code and detail (RFC 9457), or the status
 * alone when the body is no problem (a proxy in between, another server). The body is not quoted
 * otherwise: it is not ours to trust.
 */
export function refusal(reply: Extract<AdminReply, { kind: "answer" }>): string {
  const verb = reply.status >= 500 ? "failed" : "refused";
  let problem: { type?: unknown; detail?: unknown; errors?: unknown } | undefined;
  if (/json/i.test(reply.contentType))
    try {
      const parsed: unknown = JSON.parse(reply.text);
      if (typeof parsed === "object" && parsed !== null) problem = parsed;
    } catch {
      problem = undefined;
    }
  if (typeof problem?.detail !== "string")
    return `the admin API answered ${reply.status} without a problem detail${reply.status >= 300 && reply.status < 400 ? " (a redirect, which the admin API never sends: is TOLLGATE_ADMIN_URL the admin listener's address?)" : ""}`;
  const code = typeof problem.type === "string" ? ` ${printable(problem.type.replace(/^.*[/#]/, ""))}` : "";
  const hint =
    reply.status === 401
      ? " (is TOLLGATE_ADMIN_TOKEN one of the gateway's admin tokens, and TOLLGATE_ADMIN_URL its admin listener?)"
      : "";
  // A refused reload lists its problems, one FILE:LINE:COLUMN each: the operator's to fix.
  const errors = Array.isArray(problem.errors)
    ? problem.errors
        .filter((e): e is string => typeof e === "string")
        .map((e) => `\n  ${printable(e)}`)
        .join("")
    : "";
  return `the admin API ${verb} (${reply.status}${code}): ${printable(problem.detail)}${hint}${errors}`;
}
