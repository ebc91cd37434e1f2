// Which limit a descriptor of an Envoy request falls under: envoyproxy/ratelimit's GetLimit
// (src/config/config_impl.go there), walked over the compiled tree (model/rls.ts). Pure.
//
// Each entry is looked up as `<key>_<value>`, then against the level's wildcards, then as
// `<key>` alone (a default for any value). A limit applies only when it sits at the depth of
// the descriptor's last entry; a descriptor longer than the tree stops where the tree does,
// with no limit, and one that ends above a limit has none either.
import type { RlsNode, RlsRule } from "../model/rls.js";

export interface DescriptorEntry {
  key: string;
  value: string;
}

export interface Match {
  rule: RlsRule;
  /** The values the state key is built from: a share_threshold entry's wildcard in place of its value. */
  values: readonly string[];
}

export function matchDescriptor(root: RlsNode, entries: readonly DescriptorEntry[]): Match | undefined {
  let level: RlsNode = root;
  let values: string[] | undefined;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    const byValue = `${entry.key}_${entry.value}`;
    let next = level.children.get(byValue);
    let wildcard: string | undefined;
    if (next === undefined) {
      for (const w of level.wildcards) {
        if (!wildcardMatch(w.parts, byValue)) continue;
        next = level.children.get(w.key);
        wildcard = w.key;
        break;
      }
    }
    next ??= level.children.get(entry.key);
    if (next === undefined) return undefined;
    if (wildcard !== undefined && next.sharedValue !== undefined) {
      values ??= entries.map((e) => e.value);
      values[i] = next.sharedValue;
    }
    if (i === entries.length - 1) {
      return next.rule === undefined
        ? undefined
        : { rule: next.rule, values: values ?? entries.map((e) => e.value) };
    }
    if (next.children.size === 0) return undefined;
    level = next;
  }
  return undefined;
}

/** `*` matches any run of characters, as envoyproxy/ratelimit's wildcardMatch. */
export function wildcardMatch(parts: readonly string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!value.startsWith(first) || !value.endsWith(last)) return false;
  let fixed = 0;
  for (const p of parts) fixed += p.length;
  if (value.length < fixed) return false;
  let rest = value.slice(first.length, value.length - last.length);
  for (let i = 1; i < parts.length - 1; i++) {
    const at = rest.indexOf(parts[i]!);
    if (at < 0) return false;
    rest = rest.slice(at + parts[i]!.length);
  }
  return true;
}
