// How upstream stacks read a header's name. CGI, WSGI, Rack and PHP name a header `HTTP_` + its
// name upper-cased with `-` as `_` (PHP turns `.` into `_` as well), so `Tollgate_Client`,
// `Tollgate.Client` and `Tollgate-Client` are the same variable to them, and whichever comes last
// wins. The forwarding headers (proxy/headers.ts), the keyed fields (proxy/keyed-values.ts) and
// the config's credential check (config/key-checks.ts) all compare names this way.

/** The name a (lower-case) header name folds onto: `_` and `.` read as `-`. */
export function foldHeaderName(lower: string): string {
  return lower.replace(/[_.]/g, "-");
}

/** Whether a (lower-case) header name has a spelling some upstream reads as another name. */
export function hasFoldedSpelling(lower: string): boolean {
  return lower.includes("_") || lower.includes(".");
}
