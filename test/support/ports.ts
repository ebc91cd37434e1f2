import { connect, createServer } from "node:net";

/** A TCP port that was free a moment ago (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * A TCP port on 127.0.0.1 where nothing listens, for a target that must refuse connections.
 * Chosen below the ephemeral range (32768–60999 on Linux), where no `listen(0)` and no
 * outgoing connection of another test can take it meanwhile, as one from freePort() could:
 * a "dead" target that some file's gateway then answered on failed only under parallel load.
 */
export async function deadPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(false);
      });
      socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
    });
    if (refused) return port;
  }
}
