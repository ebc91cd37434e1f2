// A configuration problem as the operator sees it: `PATH:LINE:COLUMN: message`, or
// `PATH:LINE:COLUMN: warning: message` for one that does not stop the file being used.

export interface ConfigProblem {
  file: string;
  line: number;
  column: number;
  /** Dotted location in the document, e.g. `plans.free.global.rate`. */
  path: string;
  message: string;
  /** "warning": reported, and the file is used anyway. Absent: an error. */
  severity?: "warning";
}

export function formatProblem(p: ConfigProblem): string {
  const where = p.path ? `${p.path}: ` : "";
  const severity = p.severity === "warning" ? "warning: " : "";
  return `${p.file}:${p.line}:${p.column}: ${severity}${where}${p.message}`;
}

export class ConfigError extends Error {
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    super(problems.map(formatProblem).join("\n"));
    this.name = "ConfigError";
    this.problems = problems;
  }
}

/** Closest known name by edit distance, to turn a typo into a fix. */
export function suggest(word: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const candidate of known) {
    const d = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}
