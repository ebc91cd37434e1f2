// What a request costs a process, by where the CPU went, from Linux perf: samples of CPU time
// (cpu-clock, on-CPU only: a process preempted by its neighbours on a shared core is not
// sampled, where V8's --cpu-prof counts the wait in whatever function it stopped in), with call
// stacks through the JIT's frames. The process runs with NODE_PROF_ARGS (--perf-prof: V8 writes
// a jit-<pid>.dump in its working directory, which `perf inject --jit` turns into symbols that
// know when each piece of code lived; --perf-basic-prof's one map file names an address after
// whatever code held it, so code that the GC moved or dropped lends its name to its successor).
// For bench/profile.mjs.
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";

export const PERF_HZ = 999;

/** The Node flags of a process to profile; its working directory receives the JIT dump. */
export const NODE_PROF_ARGS = ["--perf-prof"];

/** Whether `perf record` works here (installed, and allowed to sample a process of ours). */
export function perfWorks() {
  const r = spawnSync("perf", ["record", "-q", "-e", "cpu-clock", "-o", "/dev/null", "--", "true"], {
    encoding: "utf8",
  });
  return r.error === undefined && r.status === 0;
}

/** Samples `pid` while `load()` runs; returns the samples' stacks, innermost frame first. */
export async function recordStacks(pid, file, load) {
  const rec = spawn(
    "perf",
    [
      "record",
      "-q",
      "-k",
      "mono",
      "-g",
      "-e",
      "cpu-clock",
      "-F",
      String(PERF_HZ),
      "-p",
      String(pid),
      "-o",
      file,
    ],
    {
      stdio: "ignore",
    },
  );
  await new Promise((r) => setTimeout(r, 300)); // perf attached before the load starts
  const result = load();
  rec.kill("SIGINT");
  await once(rec, "exit");
  const inject = spawnSync("perf", ["inject", "--jit", "-i", file, "-o", `${file}.jit`], {
    encoding: "utf8",
  });
  if (inject.status !== 0) throw new Error(`perf inject --jit failed: ${inject.stderr}`);
  const text = spawnSync("perf", ["script", "-i", `${file}.jit`], {
    encoding: "utf8",
    maxBuffer: 1 << 30,
  }).stdout;
  const samples = [];
  for (const block of text.split("\n\n")) {
    const lines = block.split("\n");
    const head = lines.find((l) => l.trim() && !/^\s/.test(l));
    const frames = lines.filter((l) => /^\s/.test(l)).map(frameName);
    if (head && frames.length) samples.push({ thread: Number(head.trim().split(/\s+/)[1]), frames });
  }
  return { result, samples };
}

/** `7f… JS:*fn file:///…/dist/x.js:3:4+0x1c (/tmp/perf-1.map)` -> `JS:*fn dist/x.js:3:4`. */
function frameName(line) {
  return line
    .trim()
    .replace(/^[0-9a-f]+ /, "")
    .replace(/\+0x[0-9a-f]+/, "")
    .replace(/ \(\/[^)]*\)$/, "")
    .replace(/^(?:Function|LazyCompile):/, "JS:")
    .replace(/file:\/\//, "")
    .replace(/\/\S*?\/(dist|node_modules|bench)\//, "$1/");
}

const jsUrl = (frame) => /^JS:[*^~]?\S* (\S+)/.exec(frame)?.[1];

/** Where a sample's CPU went, by kind: the leaf frame's package, or what the native code does. */
export function category(sample, mainThread) {
  const all = sample.frames.join(" ");
  if (sample.thread !== mainThread)
    return /compiler::|Compile/.test(all)
      ? "V8 helper threads: optimizing compiler"
      : /Scaveng|Marking|Sweep|Heap/.test(all)
        ? "V8 helper threads: garbage collector"
        : "other threads";
  const leaf = sample.frames[0];
  const url = jsUrl(leaf);
  if (url !== undefined) {
    if (url.startsWith("dist/")) return "JS: tollgate (dist/)";
    if (url.startsWith("node_modules/")) return `JS: ${url.split("/")[1]}`;
    if (url.startsWith("node:")) return "JS: Node's own (node:*)";
    return `JS: ${url.startsWith("bench/") ? url : "other"}`;
  }
  if (/\[kernel|kallsyms|do_syscall|entry_SYSCALL|^tcp_|^sock_|^__schedule|^ep_|^_raw_spin/.test(leaf))
    return "kernel";
  if (/Scaveng|Heap::|Marking|Sweeper|AllocateRaw/.test(leaf)) return "V8: allocation and GC";
  if (/^Builtins_/.test(leaf)) return "V8 builtins (property access, strings, calls, promises)";
  if (/llhttp|node::|uv_|uv__/.test(leaf)) return "Node/libuv native (parsers, streams, timers)";
  if (/malloc|free|memcpy|memmove|unlink_chunk/.test(leaf)) return "libc (malloc, memcpy)";
  return "V8 runtime";
}

/** The innermost frame in tollgate's own code: what a sample's CPU was spent for. */
export function ownFrame(sample, byFile) {
  for (const f of sample.frames) {
    const url = jsUrl(f);
    if (url?.startsWith("dist/")) {
      if (byFile) return url.replace(/:\d+:\d+$/, "");
      return `${/^JS:[*^~]?(\S*)/.exec(f)[1] || "(anonymous)"} ${url}`;
    }
  }
  return undefined;
}

/** µs of CPU per request by `keyOf(sample)`, largest first; samples it maps to undefined are left out. */
export function perRequest(samples, requests, keyOf) {
  const us = new Map();
  for (const s of samples) {
    const k = keyOf(s);
    if (k !== undefined) us.set(k, (us.get(k) ?? 0) + 1e6 / PERF_HZ / requests);
  }
  return [...us].sort((a, b) => b[1] - a[1]);
}
