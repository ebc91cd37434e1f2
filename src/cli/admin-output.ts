// What `tollgate keys …` and `tollgate overrides …` print for people (without --json): a created
// key once, with the warning that it is never shown again; lists as aligned columns. Pure: the
// admin API's parsed JSON in, text out, or why the answer is not one this CLI can read (a gateway
// of another version). Every value the API echoes is printed with its control characters escaped:
// a client id or a reason holding a terminal escape sequence is shown, never obeyed.
import type { AnswerShape } from "./admin-args.js";

export type Printed = { stdout: string; stderr: string } | { unreadable: string };

type Json = Record<string, unknown>;

// C0, DEL, C1, and the bidirectional controls (U+200E/F, U+202A–U+202E, U+2066–U+2069): a
// right-to-left override in a reason would make a terminal show the rest of its line reversed.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** `text` with C0, DEL, C1 and bidirectional control characters as \u escapes. */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** A JSON value as one printable cell: strings as written, absent as "-". */
function cell(value: unknown): string {
  if (value === undefined || value === null || value === "") return "-";
  return printable(typeof value === "string" ? value : JSON.stringify(value));
}

/** Rows under a header, each column as wide as its widest cell, two spaces apart; no trailing blanks. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return `${[header, ...rows].map(line).join("\n")}\n`;
}

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const isText = (v: unknown): v is string => typeof v === "string";

function expiry(value: unknown): string {
  return isText(value) ? `expires ${printable(value)}` : "never expires";
}

/** POST /admin/keys and POST /admin/keys/{id}/rotate: the key, once. */
function issued(body: unknown): Printed {
  if (!isObject(body) || !isText(body.id) || !isText(body.key) || !isText(body.client))
    return { unreadable: "no id, key and client in the answer" };
  const whose = [
    `plan ${cell(body.plan)}`,
    ...(isText(body.tenant) ? [`tenant ${printable(body.tenant)}`] : []),
  ];
  let out = `${printable(body.id)} for client ${printable(body.client)} (${whose.join(", ")}), ${expiry(body.expires_at)}:\n\n`;
  out += `  ${printable(body.key)}\n\n`;
  out += "This is the only time the key is shown: store it now. The gateway keeps only its SHA-256";
  out += isText(body.fingerprint) ? ` (fingerprint ${printable(body.fingerprint)}).\n` : ".\n";
  const previous = body.previous;
  if (isObject(previous) && isText(previous.id))
    out += isText(previous.expires_at)
      ? `It replaces ${printable(previous.id)}, which works until ${printable(previous.expires_at)}, then is refused.\n`
      : `It replaces ${printable(previous.id)}.\n`;
  // The API's own warning (a YAML client of that id wins): for the operator, beside the key.
  const stderr = isText(body.warning) ? `warning: ${printable(body.warning)}\n` : "";
  return { stdout: out, stderr };
}

/**
 * GET /admin/keys?client= (a list) or GET /admin/keys (a page: `{ keys, next_cursor }`): never
 * a key, its fingerprint. A page that has a next one says how to ask for it, on stderr.
 */
function keyList(answer: unknown): Printed {
  if (isObject(answer)) {
    if (!Array.isArray(answer.keys)) return { unreadable: "the answer is not a list of keys" };
    const printed = keyList(answer.keys);
    if ("unreadable" in printed || !isText(answer.next_cursor)) return printed;
    return { ...printed, stderr: `more: tollgate keys list --cursor ${printable(answer.next_cursor)}\n` };
  }
  const body = answer;
  if (!Array.isArray(body) || !body.every(isObject))
    return { unreadable: "the answer is not a list of keys" };
  if (body.length === 0) return { stdout: "no keys (none issued, or all revoked or expired)\n", stderr: "" };
  const rows = body.map((k) => [
    cell(k.id),
    cell(k.fingerprint),
    cell(k.client),
    cell(k.plan),
    cell(k.tenant),
    cell(k.created_at),
    k.expires_at === null ? "never" : cell(k.expires_at),
  ]);
  return {
    stdout: table(["ID", "FINGERPRINT", "CLIENT", "PLAN", "TENANT", "CREATED", "EXPIRES"], rows),
    stderr: "",
  };
}

function revoked(body: unknown): Printed {
  if (!isObject(body) || !isText(body.id)) return { unreadable: "no id in the answer" };
  const of = isText(body.client) ? ` of client ${printable(body.client)}` : "";
  return { stdout: `revoked ${printable(body.id)}${of}\n`, stderr: "" };
}

/** The members of an override's view that are not its size. */
const OVERRIDE_MEMBERS = new Set([
  "name",
  "caller",
  "algorithm",
  "reason",
  "set_at",
  "expires_at",
  "applies",
  "quota",
  "description",
  "not_applied",
  "overrides",
]);

/** "burst 2000, rate 1000/s": the limit's keys the override sets, in the API's order. */
function sizeOf(view: Json): string {
  const keys = Object.keys(view).filter((k) => !OVERRIDE_MEMBERS.has(k));
  return keys.length ? keys.map((k) => `${printable(k)} ${cell(view[k])}`).join(", ") : "-";
}

function isOverride(v: unknown): v is Json & { name: string; caller: string } {
  return isObject(v) && isText(v.name) && isText(v.caller);
}

/** PUT /admin/overrides/{caller}/{limit}: 201 new, 200 replaced. */
function overrideSet(body: unknown, status: number): Printed {
  if (!isOverride(body)) return { unreadable: "no name and caller in the answer" };
  const what = status === 201 ? "set" : "replaced";
  let out = `${what}: ${printable(body.caller)} ${printable(body.name)} at ${sizeOf(body)}, ${expiry(body.expires_at)}\n`;
  out += `  reason   ${cell(body.reason)}\n`;
  let stderr = "";
  if (body.applies === true) out += `  applies  ${cell(body.description)}\n`;
  else {
    out += "  applies  no\n";
    stderr = `warning: the running config does not apply it: ${cell(body.not_applied)}\n`;
  }
  return { stdout: out, stderr };
}

/** GET /admin/overrides/{caller}. */
function overrideList(body: unknown): Printed {
  if (!isObject(body) || !Array.isArray(body.overrides) || !body.overrides.every(isOverride))
    return { unreadable: "no list of overrides in the answer" };
  const caller = cell(body.caller);
  if (body.overrides.length === 0) return { stdout: `no overrides for ${caller}\n`, stderr: "" };
  const rows = body.overrides.map((o) => [
    printable(o.name),
    sizeOf(o),
    cell(o.expires_at),
    o.applies === true ? "yes" : "no",
    cell(o.reason),
  ]);
  let out = table(["LIMIT", "SIZE", "EXPIRES", "APPLIES", "REASON"], rows);
  for (const o of body.overrides)
    if (o.applies !== true) out += `${printable(o.name)} is not applied: ${cell(o.not_applied)}\n`;
  return { stdout: out, stderr: "" };
}

function overrideRemoved(body: unknown): Printed {
  if (!isOverride(body)) return { unreadable: "no name and caller in the answer" };
  return {
    stdout: `removed the override of ${printable(body.name)} for ${printable(body.caller)}\n`,
    stderr: "",
  };
}

function seconds(value: unknown): string {
  return typeof value === "number" ? `${value}s` : "-";
}

/** A limit's row: name, limit, remaining, reset, and a mark when an override sizes it. */
function limitRow(l: Json): string[] {
  const marks = [
    ...(l.shadow === true ? ["shadow"] : []),
    ...(l.override === true ? ["client override"] : []),
    ...(isObject(l.runtime_override) ? [`override until ${cell(l.runtime_override.expires_at)}`] : []),
    ...(isText(l.by) ? [`by ${printable(l.by)}`] : []),
    ...(isText(l.route) ? [`route ${printable(l.route)}`] : []),
  ];
  return [cell(l.name), cell(l.limit), cell(l.remaining), seconds(l.reset_seconds), marks.join(", ") || "-"];
}

/** GET /admin/callers/{caller}: its limits, then its recent denials. */
function caller(body: unknown): Printed {
  if (!isObject(body) || !isText(body.caller) || !Array.isArray(body.limits) || !body.limits.every(isObject))
    return { unreadable: "no caller and limits in the answer" };
  const whose = [
    `plan ${cell(body.plan)}`,
    ...(isText(body.tenant) ? [`tenant ${printable(body.tenant)}`] : []),
  ];
  let out = `${printable(body.caller)} (${whose.join(", ")})\n\n`;
  const limits = [
    ...body.limits,
    ...(Array.isArray(body.keyed_limits) ? body.keyed_limits.filter(isObject) : []),
    ...(Array.isArray(body.shared_limits) ? body.shared_limits.filter(isObject) : []),
  ];
  out += limits.length
    ? table(["LIMIT", "SIZE", "REMAINING", "RESET", "NOTE"], limits.map(limitRow))
    : "no limits apply\n";
  if (body.keyed_limits_truncated === true) out += "(more keyed limits than listed)\n";
  const denials = Array.isArray(body.recent_denials) ? body.recent_denials.filter(isObject) : [];
  out += "\n";
  out += denials.length
    ? table(
        ["DENIED AT", "ROUTE", "LIMITS"],
        denials.map((d) => [
          cell(d.time),
          cell(d.route),
          Array.isArray(d.limits) ? d.limits.map(cell).join(", ") : "-",
        ]),
      )
    : "no denials in the last hour\n";
  return { stdout: out, stderr: "" };
}

function callerReset(body: unknown): Printed {
  if (!isObject(body) || !isText(body.caller)) return { unreadable: "no caller in the answer" };
  const deleted = typeof body.keys_deleted === "number" ? body.keys_deleted : 0;
  let out = `reset ${printable(body.caller)}: ${deleted} stored state${deleted === 1 ? "" : "s"} forgotten\n`;
  if (body.keyed_limits_truncated === true) out += "some keyed limits were past the listing and stay\n";
  return { stdout: out, stderr: "" };
}

function denialsTop(body: unknown): Printed {
  if (!isObject(body) || !Array.isArray(body.callers) || !body.callers.every(isObject))
    return { unreadable: "no callers in the answer" };
  const minutes = typeof body.window_seconds === "number" ? body.window_seconds / 60 : 60;
  const span = minutes === 60 ? "last hour" : `last ${minutes} minutes`;
  if (body.callers.length === 0) return { stdout: `no caller was denied in the ${span}\n`, stderr: "" };
  return {
    stdout: table(
      ["CALLER", `DENIALS (${span.toUpperCase()})`],
      body.callers.map((c) => [cell(c.caller), cell(c.denials)]),
    ),
    stderr: "",
  };
}

function usageReport(body: unknown): Printed {
  if (!isObject(body) || !isText(body.caller) || !isObject(body.limits))
    return { unreadable: "no caller and limits in the answer" };
  const head = `${printable(body.caller)}, ${cell(body.period)}${isText(body.tenant) ? `, tenant ${printable(body.tenant)}` : ""}\n\n`;
  const rows = Object.entries(body.limits).map(([name, t]) => {
    const totals = isObject(t) ? t : {};
    return [
      printable(name),
      cell(totals.requests),
      cell(totals.tokens),
      totals.usd === undefined ? "-" : `$${cell(totals.usd)}`,
    ];
  });
  return {
    stdout:
      head +
      (rows.length ? table(["BUDGET", "REQUESTS", "TOKENS", "USD"], rows) : "nothing used in this period\n"),
    stderr: "",
  };
}

function reloaded(body: unknown): Printed {
  if (!isObject(body) || !isText(body.version)) return { unreadable: "no version in the answer" };
  let out = `reloaded: version ${printable(body.version)}`;
  out += body.changed === false ? " (the file had not changed)\n" : "\n";
  const stderr =
    Array.isArray(body.restart_required) && body.restart_required.length
      ? `warning: these take effect only after a restart: ${body.restart_required.map(cell).join(", ")}\n`
      : "";
  return { stdout: out, stderr };
}

/** GET /admin/config: the document itself, indented. */
function config(body: unknown): Printed {
  if (!isObject(body)) return { unreadable: "the answer is not a config" };
  // JSON escapes C0 characters in strings, not C1 ones: each line made printable.
  return { stdout: `${JSON.stringify(body, null, 2).split("\n").map(printable).join("\n")}\n`, stderr: "" };
}

/** A successful answer (2xx, JSON parsed) as people read it. */
export function formatAnswer(shape: AnswerShape, status: number, body: unknown): Printed {
  switch (shape) {
    case "key-issued":
      return issued(body);
    case "key-list":
    case "key-page":
      return keyList(body);
    case "caller":
      return caller(body);
    case "caller-reset":
      return callerReset(body);
    case "denials-top":
      return denialsTop(body);
    case "usage-report":
      return usageReport(body);
    case "reloaded":
      return reloaded(body);
    case "config":
      return config(body);
    case "key-revoked":
      return revoked(body);
    case "override-set":
      return overrideSet(body, status);
    case "override-list":
      return overrideList(body);
    case "override-removed":
      return overrideRemoved(body);
  }
}
