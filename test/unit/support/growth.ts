// How a cost grows with the input, without a wall-clock bound: a busy machine (the whole suite on
// two cores, a build alongside) makes any run slower, so "well under N ms" fails there while
// proving nothing about the code. What these tests mean is "linear, not quadratic", and that is
// a ratio: the same work on an input k times larger takes about k times as long when linear, k²
// times when quadratic. Load slows both sizes, measured in the same run, so the ratio holds;
// the least of a few runs of each drops the ones a burst of load or a garbage collection hit.

/** The least time one call of `run` took, in ms: calls repeated for at least `minMs`. */
function perCallMs(run: () => void, minMs: number): number {
  let calls = 0;
  const started = performance.now();
  let elapsed = 0;
  do {
    run();
    calls++;
    elapsed = performance.now() - started;
  } while (elapsed < minMs);
  return elapsed / calls;
}

/**
 * How many times longer `big` takes than `small` (the same work on a larger input), from the
 * least time of each over up to `attempts` interleaved measurements; it stops measuring as soon
 * as the ratio is under `limit`. `small` runs once first, unmeasured, so that compiling the
 * code does not count against it. A quadratic cost stays far above a linear one's limit however
 * often it is measured.
 */
export function growthRatio(
  small: () => void,
  big: () => void,
  limit: number,
  { attempts = 4, minMs = 20 }: { attempts?: number; minMs?: number } = {},
): number {
  small();
  let s = Number.POSITIVE_INFINITY;
  let b = Number.POSITIVE_INFINITY;
  for (let i = 0; i < attempts; i++) {
    s = Math.min(s, perCallMs(small, minMs));
    b = Math.min(b, perCallMs(big, minMs));
    if (b / s < limit) break;
  }
  return b / s;
}

/**
 * A stand-in for the string `text` that counts the characters read from it: each indexed read
 * counts one, each search (indexOf, includes, startsWith…) the characters from where it started
 * to where it stopped, each slice, split, regex match or conversion to a string what it copies
 * or scans. A count of work, not of time: a scan that only moves forward reads each character
 * a few times however many placeholders the text holds; one that rescans from a line's start,
 * or from the top, per placeholder reads it once per placeholder. For code that only reads its
 * argument as a string (indexing, methods, template literals), not code that checks
 * `typeof text === "string"`.
 */
export function countingText(text: string): { text: string; read: () => number } {
  let read = 0;
  const whole = () => {
    read += text.length;
    return text;
  };
  const scan = (from: number, found: number, width: number) => {
    read += (found === -1 ? text.length : found + width) - Math.max(0, Math.min(from, text.length));
  };
  const methods: Record<PropertyKey, (...args: never[]) => unknown> = {
    indexOf: (search: string, from = 0) => {
      const found = text.indexOf(search, from);
      scan(from, found, search.length);
      return found;
    },
    slice: (start?: number, end?: number) => {
      const part = text.slice(start, end);
      read += part.length;
      return part;
    },
    toString: whole,
    valueOf: whole,
    [Symbol.toPrimitive]: whole,
  };
  const proxy = new Proxy(Object(text) as object, {
    get(target, prop) {
      if (typeof prop === "string" && /^\d+$/.test(prop)) {
        read++;
        return text[Number(prop)];
      }
      if (prop === "length") return text.length;
      if (Object.hasOwn(methods, prop)) return methods[prop];
      const value = Reflect.get(target, prop);
      if (typeof value !== "function") return value;
      // Any other string method: as costly as reading the whole text.
      return (...args: unknown[]) => (value as (...a: unknown[]) => unknown).apply(whole(), args);
    },
  });
  return { text: proxy as unknown as string, read: () => read };
}
