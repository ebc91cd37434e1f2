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

const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * One pass over the source, linear in its length however many placeholders it holds: each
 * placeholder is found from where the last one ended, and whether it sits in a comment is known
 * from a scan that only ever moves forward (a regex or a scan from the line's start per
 * placeholder would make 80,000 placeholders on one line take minutes).
 */
export function substituteEnv(
  source: string,
  env: Readonly<Record<string, string | undefined>>,
): SubstitutedText {
  const substitutions: Substitution[] = [];
  const problems: EnvProblem[] = [];
  const parts: string[] = [];
  let outputLength = 0;
  let last = 0;
  const comments = new CommentScanner(source);
  for (let start = source.indexOf("${"); start !== -1; ) {
    const close = source.indexOf("}", start + 2);
    // No `}` after this `${`: none after any later one either.
    if (close === -1) break;
    const end = close + 1;
    // A line comment is not configuration: a placeholder there must neither fail nor substitute.
    if (comments.inComment(start)) {
      start = source.indexOf("${", end);
      continue;
    }
    const body = source.slice(start + 2, close);
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
    if (start > last) {
      parts.push(source.slice(last, start));
      outputLength += start - last;
    }
    substitutions.push({
      sourceStart: start,
      sourceEnd: end,
      outputStart: outputLength,
      outputEnd: outputLength + value.length,
    });
    if (value) parts.push(value);
    outputLength += value.length;
    last = end;
    start = source.indexOf("${", end);
  }
  parts.push(source.slice(last));
  return { text: parts.join(""), substitutions, problems };
}

/** Maps an offset in the substituted text to the offset in the source it came from. */
export function toSourceOffset(substitutions: readonly Substitution[], outputOffset: number): number {
  // The last substitution that starts at or before the offset (they are in output order).
  let lo = 0;
  let hi = substitutions.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (substitutions[mid]!.outputStart <= outputOffset) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (found === -1) return outputOffset;
  // Values occupy disjoint, ordered ranges of the output, so only this one can contain it.
  const s = substitutions[found]!;
  // Inside a substituted value: point at the placeholder that produced it.
  if (outputOffset < s.outputEnd) return s.sourceStart;
  return outputOffset + (s.sourceEnd - s.outputEnd);
}

/**
 * Whether offsets, asked in increasing order, fall in a YAML line comment: a `#` at line start or
 * after whitespace, outside quotes. Scans each character once however many offsets are asked.
 */
class CommentScanner {
  private pos = 0;
  private quote: string | null = null;
  private comment = false;
  constructor(private readonly source: string) {}

  inComment(offset: number): boolean {
    const { source } = this;
    for (; this.pos < offset; this.pos++) {
      const c = source[this.pos]!;
      if (c === "\n") {
        this.quote = null;
        this.comment = false;
      } else if (this.comment) {
        // The rest of the line is the comment.
      } else if (this.quote) {
        if (c === this.quote) this.quote = null;
      } else if (c === '"' || c === "'") {
        this.quote = c;
      } else if (c === "#" && (this.pos === 0 || /\s/.test(source[this.pos - 1]!))) {
        this.comment = true;
      }
    }
    return this.comment;
  }
}
