// The worker thread of loadConfigFileOffThread: loads one config file and posts the result back.
import { parentPort, workerData } from "node:worker_threads";
import { loadForTransfer } from "./load.js";

const { file, env } = workerData as { file: string; env: Record<string, string | undefined> };
parentPort!.postMessage(await loadForTransfer(file, env));
