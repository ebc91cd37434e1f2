// What `--check` finds wrong with header rules (`request_headers`, `response_headers` on
// upstreams and routes): a name the gateway owns, a name both set and removed, a value that is
// empty (the variable it came from is unset) or that no header can carry. Messages never quote a
// value: a rule's values are secrets (a provider's key).
import { validateHeaderValue } from "node:http";
import { ownedRequestHeader, ownedResponseHeader, type WrittenHeaderRules } from "../http/header-rules.js";
import type { CheckableConfig } from "./checkable.js";
import type { PathSegment } from "./document.js";

type Add = (path: PathSegment[], message: string, atKey?: string) => void;

export function checkHeaderRules(config: CheckableConfig, add: Add): void {
  for (const [name, upstream] of Object.entries(config.upstreams)) {
    if (typeof upstream === "string") continue;
    checkRules(["upstreams", name, "request_headers"], upstream.request_headers, "request", add);
    checkRules(["upstreams", name, "response_headers"], upstream.response_headers, "response", add);
  }
  config.routes.forEach((route, i) => {
    if (!route) return;
    checkRules(["routes", i, "request_headers"], route.request_headers, "request", add);
    checkRules(["routes", i, "response_headers"], route.response_headers, "response", add);
  });
}

/** A scheme and nothing else (`Bearer ${EMPTY}`): a credential whose secret is missing. */
const EMPTY_CREDENTIAL = /^\s*(bearer|basic|token|digest|apikey|api-key)\s*$/i;

function checkRules(
  at: PathSegment[],
  rules: WrittenHeaderRules | undefined,
  direction: "request" | "response",
  add: Add,
): void {
  if (!rules) return;
  const owned = direction === "request" ? ownedRequestHeader : ownedResponseHeader;
  const removed = new Set((rules.remove ?? []).map((n) => n.toLowerCase()));
  for (const [name, value] of Object.entries(rules.set ?? {})) {
    const lower = name.toLowerCase();
    const why = owned(lower);
    if (why) add([...at, "set"], `${name} cannot be set here: ${why}`, name);
    else if (removed.has(lower)) add([...at, "set"], `${name} is both set and removed: keep one`, name);
    else if (value === "")
      add(
        [...at, "set"],
        `${name} is set to an empty value: the variable it comes from is probably unset (\${NAME:-} gives ""); set it, or remove this rule`,
        name,
      );
    else if (EMPTY_CREDENTIAL.test(value))
      add(
        [...at, "set"],
        `${name} names an authentication scheme with no credential after it: the variable that should follow it is probably empty; set it, or remove this rule`,
        name,
      );
    else if (!headerValueOk(value))
      add(
        [...at, "set"],
        `${name}'s value cannot be sent in a header (a line break, a control character or a character outside Latin-1); the value is not shown, it may be a secret`,
        name,
      );
  }
  (rules.remove ?? []).forEach((name, j) => {
    const why = owned(name.toLowerCase());
    if (why) add([...at, "remove", j], `${name} cannot be removed here: ${why}`);
  });
}

function headerValueOk(value: string): boolean {
  try {
    validateHeaderValue("x", value);
    return !/[^\x00-\xff]/.test(value);
  } catch {
    return false;
  }
}
