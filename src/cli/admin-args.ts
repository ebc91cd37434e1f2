// `tollgate keys …` and `tollgate overrides …` as words: which admin API request a command line
// asks for, or why it asks for none (help, or a usage error answered 64 like the gateway's flags).
// Pure: no environment, no sockets. Only what the CLI can know without the gateway is checked
// here (flags, their count, whole numbers); a duration, a plan or a size is the admin API's to
// judge, so a CLI older or newer than the gateway never disagrees with it.

/** One request to the admin API, its path already percent-encoded. */
export interface AdminRequest {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  body?: Record<string, unknown>;
}

/** How a successful answer is printed when --json is not given. */
export type AnswerShape =
  | "key-issued"
  | "key-list"
  | "key-page"
  | "caller"
  | "caller-reset"
  | "denials-top"
  | "usage-report"
  | "reloaded"
  | "config"
  | "key-revoked"
  | "override-set"
  | "override-list"
  | "override-removed";

export interface AdminCommand {
  /** "keys create": how messages name it. */
  name: string;
  request: AdminRequest;
  shape: AnswerShape;
  /** Print the API's JSON as it is. */
  json: boolean;
}

export type ParsedAdminCommand =
  | { kind: "command"; command: AdminCommand }
  | { kind: "help"; text: string }
  | { kind: "usage"; message: string };

/** The words that start an admin command (the first argument). */
export const ADMIN_GROUPS = [
  "keys",
  "overrides",
  "callers",
  "denials",
  "usage",
  "reset",
  "reload",
  "config",
] as const;
export type AdminGroup = (typeof ADMIN_GROUPS)[number];

export function isAdminGroup(word: string | undefined): word is AdminGroup {
  return (ADMIN_GROUPS as readonly string[]).includes(word ?? "");
}

const FOOTER = `The admin API is at $TOLLGATE_ADMIN_URL (e.g. http://127.0.0.1:9090, the admin listener),
called with $TOLLGATE_ADMIN_TOKEN (one of admin.tokens: scope write for changes, read for lists).

  --json   print the admin API's JSON answer as it is

Exit status: 0 done; 1 the admin API refused (its detail on stderr) or could not be reached;
2 TOLLGATE_ADMIN_URL or TOLLGATE_ADMIN_TOKEN is missing or unusable; 64 bad usage.
`;

export const KEYS_USAGE = `usage: tollgate keys create --client ID --plan PLAN [--tenant T] [--expires-in 30d] [--json]
       tollgate keys list [--client ID] [--plan P] [--tenant T] [--limit N] [--cursor C] [--json]
       tollgate keys revoke ID [--json]
       tollgate keys rotate ID [--grace 2s] [--json]

  create   issue an API key for a client on a plan. The key is printed once and never again:
           only its SHA-256 is stored. --expires-in ends it by itself (default: never).
  list     keys issued at runtime: id, fingerprint (the first 12 hex digits of the key's
           SHA-256), client, plan, tenant, created, expires; never the key. --client lists
           one client's; without it every client's, --limit (default 100) a page, the next
           page with the --cursor the last one printed; --plan and --tenant keep those
  revoke   refuse the key, on every instance within a second
  rotate   issue a successor (same client, plan, tenant and expiry), printed once; the old key
           keeps working for --grace (default 0s: not at all), then is refused

${FOOTER}`;

export const OVERRIDES_USAGE = `usage: tollgate overrides set CALLER LIMIT SIZE... --expires-in D --reason TEXT [--json]
       tollgate overrides list CALLER [--json]
       tollgate overrides delete CALLER LIMIT [--json]

  set      size one caller's limit for a while, on every instance within a second; a second
           set replaces it. SIZE is the limit's own keys that change (the rest stays as
           configured, e.g. --burst 2000 alone), checked as the config checks them:
             --burst N --rate R     a token bucket (or --limit N --window W; --batch N)
             --limit N --window W   the window algorithms
             --rate R --queue N     a leaky bucket
             --max-in-flight N --lease D   a concurrency limit
           --expires-in (1s to 30d) ends it by itself; --reason says why (audited)
  list     the caller's overrides: limit, size, expiry, whether the running config applies it
  delete   end the override now

  CALLER is client:<id> or tenant:<id>; LIMIT is <plan>.<key> or <route>.<name>, e.g.
  tollgate overrides set client:acme pro.global --burst 2000 --rate 1000/s --expires-in 7d --reason "launch week"

${FOOTER}`;

export const CALLERS_USAGE = `usage: tollgate callers CALLER [--plan P] [--tenant T] [--denials N] [--json]

  Every limit CALLER meets, with its limit, remaining and reset, read without consuming
  anything, and its recent denials, newest first (--denials: at most N, default all the log
  keeps: 50 over the last hour). CALLER is client:<id>, tenant:<id> or ip:<address>; --plan
  and --tenant read a caller the config does not name (a JWT's) under that plan.

${FOOTER}`;

export const DENIALS_USAGE = `usage: tollgate denials [--top N] [--minutes M] [--json]

  The callers denied most over the last hour, across every instance (default: the top 10);
  --minutes 5 (10, … 60) over the last minutes instead, in five-minute buckets.

${FOOTER}`;

export const USAGE_USAGE = `usage: tollgate usage CALLER [--period YYYY-MM|YYYY-MM-DD] [--json]
       tollgate usage export ... (tollgate usage export --help)

  What CALLER used of its budgets in a month or a day (default: this month): requests,
  tokens and dollars per budget. The billing export of every caller is tollgate usage export.

${FOOTER}`;

export const RESET_USAGE = `usage: tollgate reset CALLER [--json]

  Forget every limit state of CALLER (client:<id>, tenant:<id> or ip:<address>) and its
  denial log, on every instance within a second: its next request starts afresh. Audited.
  Limits it shares with others (a route budget) stay: reset those by name in the admin API.

${FOOTER}`;

export const RELOAD_USAGE = `usage: tollgate reload [--json]

  Read the config file again, as SIGHUP does. A file with errors is refused with each one as
  FILE:LINE:COLUMN, and the previous config keeps serving (exit 1). Audited.

${FOOTER}`;

export const CONFIG_USAGE = `usage: tollgate config [--json]

  The running config as the gateway holds it (secrets shown as "set"), with its version and
  when it was loaded.

${FOOTER}`;

/** What a flag holds: free text (the API judges it), a whole number, or nothing (a switch). */
type FlagKind = "text" | "count" | "switch";

interface Subcommand {
  usage: string;
  positionals: readonly string[];
  flags: Readonly<Record<string, FlagKind>>;
  required: readonly string[];
  shape: AnswerShape;
  request(positional: readonly string[], flags: ReadonlyMap<string, string | number>): AdminRequest;
}

const seg = encodeURIComponent;

/** The flags `names` that were given, as body members (`expires-in` → `expires_in`). */
function members(
  flags: ReadonlyMap<string, string | number>,
  names: readonly string[],
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const name of names) {
    const value = flags.get(name);
    if (value !== undefined) body[name.replaceAll("-", "_")] = value;
  }
  return body;
}

/** An override's size flags: the keys some algorithm takes (the API refuses those its limit does not). */
const SIZE_FLAGS = ["burst", "rate", "limit", "window", "batch", "queue", "max-in-flight", "lease"] as const;

const KEYS: Readonly<Record<string, Subcommand>> = {
  create: {
    usage: KEYS_USAGE,
    positionals: [],
    flags: { client: "text", plan: "text", tenant: "text", "expires-in": "text" },
    required: ["client", "plan"],
    shape: "key-issued",
    request: (_p, flags) => ({
      method: "POST",
      path: "/admin/keys",
      body: members(flags, ["client", "plan", "tenant", "expires-in"]),
    }),
  },
  list: {
    usage: KEYS_USAGE,
    positionals: [],
    flags: { client: "text", plan: "text", tenant: "text", limit: "count", cursor: "text" },
    required: [],
    shape: "key-list",
    request: (_p, flags) => ({
      method: "GET",
      path: withQuery("/admin/keys", query(flags, ["client", "plan", "tenant", "limit", "cursor"])),
    }),
  },
  revoke: {
    usage: KEYS_USAGE,
    positionals: ["ID"],
    flags: {},
    required: [],
    shape: "key-revoked",
    request: ([id]) => ({ method: "DELETE", path: `/admin/keys/${seg(id!)}` }),
  },
  rotate: {
    usage: KEYS_USAGE,
    positionals: ["ID"],
    flags: { grace: "text" },
    required: [],
    shape: "key-issued",
    request: ([id], flags) => ({
      method: "POST",
      path: `/admin/keys/${seg(id!)}/rotate`,
      body: members(flags, ["grace"]),
    }),
  },
};

const OVERRIDES: Readonly<Record<string, Subcommand>> = {
  set: {
    usage: OVERRIDES_USAGE,
    positionals: ["CALLER", "LIMIT"],
    flags: {
      burst: "count",
      rate: "text",
      limit: "count",
      window: "text",
      batch: "count",
      queue: "count",
      "max-in-flight": "count",
      lease: "text",
      "expires-in": "text",
      reason: "text",
    },
    // The admin API requires both: an override ends by itself, and says why it exists.
    required: ["expires-in", "reason"],
    shape: "override-set",
    request: ([caller, limit], flags) => ({
      method: "PUT",
      path: `/admin/overrides/${seg(caller!)}/${seg(limit!)}`,
      body: members(flags, [...SIZE_FLAGS, "expires-in", "reason"]),
    }),
  },
  list: {
    usage: OVERRIDES_USAGE,
    positionals: ["CALLER"],
    flags: {},
    required: [],
    shape: "override-list",
    request: ([caller]) => ({ method: "GET", path: `/admin/overrides/${seg(caller!)}` }),
  },
  delete: {
    usage: OVERRIDES_USAGE,
    positionals: ["CALLER", "LIMIT"],
    flags: {},
    required: [],
    shape: "override-removed",
    request: ([caller, limit]) => ({
      method: "DELETE",
      path: `/admin/overrides/${seg(caller!)}/${seg(limit!)}`,
    }),
  },
};

/** The flags `names` that were given, as a query string (`--denials 5` → `denials=5`). */
function query(
  flags: ReadonlyMap<string, string | number>,
  names: readonly string[],
  as: Record<string, string> = {},
): string {
  const q = new URLSearchParams();
  for (const name of names) {
    const value = flags.get(name);
    if (value !== undefined) q.set(as[name] ?? name, String(value));
  }
  return q.toString();
}

/** `path` with `?query` when there is one. */
const withQuery = (path: string, q: string) => (q ? `${path}?${q}` : path);

/** Commands of one word: `tollgate callers client:acme`, `tollgate reload`. */
const DIRECT: Readonly<Record<Exclude<AdminGroup, "keys" | "overrides">, Subcommand>> = {
  callers: {
    usage: CALLERS_USAGE,
    positionals: ["CALLER"],
    flags: { plan: "text", tenant: "text", denials: "count" },
    required: [],
    shape: "caller",
    request: ([caller], flags) => ({
      method: "GET",
      path: withQuery(
        `/admin/callers/${seg(caller!)}`,
        query(flags, ["plan", "tenant", "denials"], { denials: "limit" }),
      ),
    }),
  },
  denials: {
    usage: DENIALS_USAGE,
    positionals: [],
    flags: { top: "count", minutes: "count" },
    required: [],
    shape: "denials-top",
    request: (_p, flags) => ({
      method: "GET",
      path: withQuery("/admin/denials/top", query(flags, ["top", "minutes"], { top: "n" })),
    }),
  },
  usage: {
    usage: USAGE_USAGE,
    positionals: ["CALLER"],
    flags: { period: "text" },
    required: [],
    shape: "usage-report",
    request: ([caller], flags) => ({
      method: "GET",
      path: withQuery(`/admin/usage/${seg(caller!)}`, query(flags, ["period"])),
    }),
  },
  reset: {
    usage: RESET_USAGE,
    positionals: ["CALLER"],
    flags: {},
    required: [],
    shape: "caller-reset",
    request: ([caller]) => ({ method: "DELETE", path: `/admin/callers/${seg(caller!)}` }),
  },
  reload: {
    usage: RELOAD_USAGE,
    positionals: [],
    flags: {},
    required: [],
    shape: "reloaded",
    request: () => ({ method: "POST", path: "/admin/reload" }),
  },
  config: {
    usage: CONFIG_USAGE,
    positionals: [],
    flags: {},
    required: [],
    shape: "config",
    request: () => ({ method: "GET", path: "/admin/config" }),
  },
};

const GROUPS: Readonly<
  Record<"keys" | "overrides", { usage: string; subcommands: Readonly<Record<string, Subcommand>> }>
> = {
  keys: { usage: KEYS_USAGE, subcommands: KEYS },
  overrides: { usage: OVERRIDES_USAGE, subcommands: OVERRIDES },
};

const isHelp = (arg: string) => arg === "--help" || arg === "-h";

/** `argv` as given after `tollgate` (its first word is `keys` or `overrides`). */
export function parseAdminCommand(argv: readonly string[]): ParsedAdminCommand {
  const groupName = argv[0];
  if (!isAdminGroup(groupName)) throw new Error(`not an admin command: ${groupName}`);
  if (groupName !== "keys" && groupName !== "overrides") {
    const rest = argv.slice(1);
    if (rest[0] === "help") return { kind: "help", text: DIRECT[groupName].usage };
    return parseSubcommand(groupName, DIRECT[groupName], rest);
  }
  const group = GROUPS[groupName];
  const word = argv[1];
  if (word === undefined)
    return { kind: "usage", message: `tollgate ${groupName} needs a command\n\n${group.usage}` };
  if (isHelp(word) || word === "help") return { kind: "help", text: group.usage };
  const sub = Object.hasOwn(group.subcommands, word) ? group.subcommands[word] : undefined;
  if (!sub)
    return {
      kind: "usage",
      message: `unknown command "${groupName} ${word}": ${groupName} takes ${Object.keys(group.subcommands).join(", ")}\n\n${group.usage}`,
    };
  return parseSubcommand(`${groupName} ${word}`, sub, argv.slice(2));
}

/** The words after a command's name: its positionals and flags, or why they are not. */
function parseSubcommand(name: string, sub: Subcommand, rest: readonly string[]): ParsedAdminCommand {
  if (rest.some(isHelp)) return { kind: "help", text: sub.usage };
  const usage = (why: string): ParsedAdminCommand => ({
    kind: "usage",
    message: `${name}: ${why}\n\n${sub.usage}`,
  });

  const positional: string[] = [];
  const flags = new Map<string, string | number>();
  let json = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (!arg.startsWith("--") || arg === "--") {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const flag = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    if (flag === "json") {
      if (eq !== -1) return usage("--json takes no value");
      json = true;
      continue;
    }
    const kind = Object.hasOwn(sub.flags, flag) ? sub.flags[flag] : undefined;
    if (kind === undefined) return usage(`unknown argument "${eq === -1 ? arg : arg.slice(0, eq)}"`);
    if (flags.has(flag)) return usage(`--${flag} is given twice`);
    let value: string | undefined;
    if (eq !== -1) value = arg.slice(eq + 1);
    else {
      value = rest[i + 1];
      if (value === undefined || value.startsWith("--")) return usage(`--${flag} needs a value`);
      i++;
    }
    if (value === "") return usage(`--${flag} needs a value`);
    if (kind === "count") {
      // A JSON number for the API: only digits, so "1e3", "0x10" or "2.5" never pass as a size.
      if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value)))
        return usage(`--${flag} takes a whole number, e.g. --${flag} 20`);
      flags.set(flag, Number(value));
    } else flags.set(flag, value);
  }

  if (positional.length < sub.positionals.length)
    return usage(`give ${sub.positionals.slice(positional.length).join(" and ")}`);
  if (positional.length > sub.positionals.length)
    return usage(`unexpected argument "${positional[sub.positionals.length]}"`);
  const missing = sub.required.filter((f) => !flags.has(f));
  if (missing.length) return usage(`give ${missing.map((f) => `--${f}`).join(" and ")}`);
  if (sub.shape === "override-set" && !SIZE_FLAGS.some((f) => flags.has(f)))
    return usage("give the new size: the limit's own keys that change, e.g. --burst 2000");
  return {
    kind: "command",
    command: { name, request: sub.request(positional, flags), shape: sub.shape, json },
  };
}
