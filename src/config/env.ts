// `${NAME}` and `${NAME:-default}` substitution in the YAML text, before parsing.
//
// Substitution shifts columns, so every replacement is recorded and `toSourceOffset` maps an
// offset in the substituted text back to the file the operator edits: errors must point at
// what they can see, not at text that exists only in memory.

export interface Substitution {
  sourceStart: number;
  sourceEnd: number;
  outputStart: number;
  outputEnd: number;
}

export interface EnvProblem {
  offset: number;
  message: string;
}

export interface SubstitutedText {
  text: string;
  substitutions: Substitution[];
  problems: EnvProblem[];
}

const PLACEHOLDER = /\$\{([^}]*)\}/g;
const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function substituteEnv(
  source: string,
  env: Readonly<Record<string, string | undefined>>,
): SubstitutedText {
  const substitutions: Substitution[] = [];
  const problems: EnvProblem[] = [];
  let text = "";
  let last = 0;
  for (const match of source.matchAll(PLACEHOLDER)) {
    const start = match.index;
    const end = start + match[0].length;
    // A line comment is not configuration: a placeholder there must neither fail nor substitute.
    if (isInComment(source, start)) continue;
    const body = match[1]!;
    const sep = body.indexOf(":-");
    const name = sep === -1 ? body : body.slice(0, sep);
    let value: string;
    if (!NAME_RE.test(name)) {
      problems.push({
        offset: start,
        message: `"\${${body}}" is not a valid placeholder; write \${NAME} or \${NAME:-default}`,
      });
      value = "";
    } else if (sep !== -1) {
      // As in sh and docker compose: the default applies when the variable is unset or empty.
      value = env[name] || body.slice(sep + 2);
    } else if (env[name] !== undefined) {
      value = env[name]!;
    } else {
      problems.push({
        offset: start,
        message: `environment variable ${name} is not set; set it, or give a default with \${${name}:-default}`,
      });
      value = "";
    }
    text += source.slice(last, start);
    substitutions.push({
      sourceStart: start,
      sourceEnd: end,
      outputStart: text.length,
      outputEnd: text.length + value.length,
    });
    text += value;
    last = end;
  }
  text += source.slice(last);
  return { text, substitutions, problems };
}

/** Maps an offset in the substituted text to the offset in the source it came from. */
export function toSourceOffset(substitutions: readonly Substitution[], outputOffset: number): number {
  let delta = 0;
  for (const s of substitutions) {
    if (outputOffset < s.outputStart) break;
    // Inside a substituted value: point at the placeholder that produced it.
    if (outputOffset < s.outputEnd) return s.sourceStart;
    delta = s.sourceEnd - s.outputEnd;
  }
  return outputOffset + delta;
}

function isInComment(source: string, offset: number): boolean {
  const lineStart = source.lastIndexOf("\n", offset - 1) + 1;
  const before = source.slice(lineStart, offset);
  // A `#` starts a YAML comment at line start or after whitespace, outside quotes.
  let quote: string | null = null;
  for (let i = 0; i < before.length; i++) {
    const c = before[i]!;
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === "#" && (i === 0 || /\s/.test(before[i - 1]!))) {
      return true;
    }
  }
  return false;
}
