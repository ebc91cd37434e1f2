// Watches the files a config is made of (the YAML, and the JWT key file it names) and calls back
// once they have been quiet for a moment.
//
// Directories are watched, not files: editors replace a file by rename and Kubernetes swaps a
// ConfigMap's `..data` symlink, and either would end a watch on the file itself. A key file
// outside the config's directory gets a watch on its own directory.
import { type FSWatcher, watch } from "node:fs";
import { basename, dirname, resolve } from "node:path";

export class ConfigWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  /** Per watched directory, the names in it that matter. */
  private names = new Map<string, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly onChange: () => void,
    private readonly onError: (err: Error, dir: string) => void,
    private readonly debounceMs: number,
  ) {}

  /**
   * Watches exactly `files` from now on (called again after each reload, since a reload may name
   * another key file): directories no longer needed are unwatched, new ones watched.
   */
  watch(files: readonly string[]): void {
    if (this.closed) return;
    const wanted = new Map<string, Set<string>>();
    for (const file of files) {
      const path = resolve(file);
      const dir = dirname(path);
      let names = wanted.get(dir);
      if (!names) {
        names = new Set();
        wanted.set(dir, names);
      }
      names.add(basename(path));
    }
    for (const [dir, watcher] of this.watchers) {
      if (wanted.has(dir)) continue;
      watcher.close();
      this.watchers.delete(dir);
    }
    this.names = wanted;
    for (const dir of wanted.keys()) {
      if (this.watchers.has(dir)) continue;
      try {
        const watcher = watch(dir, { persistent: false }, (_event, name) => this.changed(dir, name));
        watcher.on("error", (err) => this.onError(err, dir));
        this.watchers.set(dir, watcher);
      } catch (err) {
        this.onError(err as Error, dir);
      }
    }
  }

  /** The directories being watched (for tests and logs). */
  get directories(): string[] {
    return [...this.watchers.keys()];
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private changed(dir: string, name: string | Buffer | null): void {
    const names = this.names.get(dir);
    if (!names || this.closed) return;
    // No name: the platform did not say which file, so any may have changed. A name starting
    // with `..` is a Kubernetes ConfigMap swapping its data directory under the symlinks.
    if (name) {
      const text = String(name);
      if (!names.has(text) && !text.startsWith("..")) return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(this.onChange, this.debounceMs);
  }
}
