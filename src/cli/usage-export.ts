// `tollgate usage export --period P [--format csv|jsonl] [--by client|tenant] [--output FILE]`:
// the billing export (GET /admin/usage/export) streamed to stdout or a file as it arrives, never
// held whole. A transfer the gateway cut (its store failed mid-way) or that stalls fails the
// command (exit 1); with --output the rows go to FILE.partial and are renamed to FILE only once
// the last byte arrived, so a cut export never leaves a file that looks complete.
import { createWriteStream } from "node:fs";
import { rename, rm } from "node:fs/promises";
import type { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { type AdminTarget, adminTarget, whyUnreachable } from "./admin-client.js";
import { EXIT_ENVIRONMENT, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, refusal } from "./admin-command.js";

export const USAGE_EXPORT_USAGE = `usage: tollgate usage export [--period YYYY-MM|YYYY-MM-DD] [--format csv|jsonl] [--by client|tenant] [--output FILE]

  export   every caller's usage of a month or a day, one row per caller and budget:
           period, tenant, caller, budget, requests, tokens, usd (dollars, six places;
           empty when the budget is not priced). Streamed: a million callers take the memory
           of a page. Default: this month, csv, by client (clients and IPs; by tenant: each
           tenant's sum). --output writes FILE only once the export is complete.

The admin API is at $TOLLGATE_ADMIN_URL (e.g. http://127.0.0.1:9090, the admin listener),
called with $TOLLGATE_ADMIN_TOKEN (one of admin.tokens; scope read is enough).

Exit status: 0 done; 1 the admin API refused, failed, cut the export or could not be reached;
2 TOLLGATE_ADMIN_URL or TOLLGATE_ADMIN_TOKEN is missing or unusable; 64 bad usage.
`;

/** Longest wait for the first byte (the first page) and between two chunks. */
export const EXPORT_IDLE_MS = 60_000;

export interface ExportIo {
  env: Readonly<Record<string, string | undefined>>;
  stdout: Writable;
  stderr(text: string): void;
  idleMs?: number;
}

type Parsed =
  | { kind: "run"; query: URLSearchParams; output: string | undefined }
  | { kind: "help" }
  | { kind: "usage"; message: string };

export function parseUsageExport(argv: readonly string[]): Parsed {
  if (argv[1] === undefined)
    return { kind: "usage", message: `tollgate usage needs a command\n\n${USAGE_EXPORT_USAGE}` };
  if (argv[1] === "--help" || argv[1] === "-h" || argv[1] === "help") return { kind: "help" };
  if (argv[1] !== "export")
    return {
      kind: "usage",
      message: `unknown command "usage ${argv[1]}": usage takes export\n\n${USAGE_EXPORT_USAGE}`,
    };
  const query = new URLSearchParams();
  let output: string | undefined;
  const rest = argv.slice(2);
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === "--help" || arg === "-h") return { kind: "help" };
    const eq = arg.indexOf("=");
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    if (!["--period", "--format", "--by", "--output"].includes(flag))
      return { kind: "usage", message: `usage export: unknown argument "${flag}"\n\n${USAGE_EXPORT_USAGE}` };
    const value = eq === -1 ? rest[++i] : arg.slice(eq + 1);
    if (!value || value.startsWith("--"))
      return { kind: "usage", message: `usage export: ${flag} needs a value\n\n${USAGE_EXPORT_USAGE}` };
    const name = flag.slice(2);
    if (name === "output") output = value;
    else if (query.has(name))
      return { kind: "usage", message: `usage export: ${flag} is given twice\n\n${USAGE_EXPORT_USAGE}` };
    else query.set(name, value);
  }
  return { kind: "run", query, output };
}

export async function runUsageExport(argv: readonly string[], io: ExportIo): Promise<number> {
  const parsed = parseUsageExport(argv);
  if (parsed.kind === "help") {
    io.stdout.write(USAGE_EXPORT_USAGE);
    return EXIT_OK;
  }
  if (parsed.kind === "usage") {
    io.stderr(parsed.message);
    return EXIT_USAGE;
  }
  const say = (line: string) => io.stderr(`tollgate usage export: ${line}\n`);
  const found = adminTarget(io.env);
  if (!found.ok) {
    for (const problem of found.problems) say(problem);
    return EXIT_ENVIRONMENT;
  }
  return exportTo(found.target, parsed.query, parsed.output, io, say);
}

async function exportTo(
  target: AdminTarget,
  query: URLSearchParams,
  output: string | undefined,
  io: ExportIo,
  say: (line: string) => void,
): Promise<number> {
  const { request } = await import("undici");
  const idleMs = io.idleMs ?? EXPORT_IDLE_MS;
  let res: Awaited<ReturnType<typeof request>>;
  try {
    res = await request(`${target.base}/admin/usage/export?${query}`, {
      method: "GET",
      headers: {
        authorization: `Bearer ${target.token}`,
        accept: "text/csv, application/jsonl, application/problem+json",
      },
      headersTimeout: idleMs,
      bodyTimeout: idleMs,
    });
  } catch (err) {
    say(`cannot reach the admin API at ${target.base}: ${whyUnreachable(err, idleMs)}`);
    return EXIT_REFUSED;
  }
  if (res.statusCode < 200 || res.statusCode > 299) {
    const type = res.headers["content-type"];
    const text = await res.body.text().catch(() => "");
    say(refusal({ kind: "answer", status: res.statusCode, contentType: String(type ?? ""), text }));
    return EXIT_REFUSED;
  }
  const partial = output === undefined ? undefined : `${output}.partial`;
  try {
    if (partial === undefined) await pipeline(res.body, io.stdout, { end: false });
    else {
      await pipeline(res.body, createWriteStream(partial));
      await rename(partial, output!);
    }
    return EXIT_OK;
  } catch (err) {
    if (partial !== undefined) await rm(partial, { force: true });
    say(`the export was cut short (${whyUnreachable(err, idleMs)}): nothing is complete; run it again`);
    return EXIT_REFUSED;
  }
}
