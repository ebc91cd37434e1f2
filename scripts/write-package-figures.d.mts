export const PAGES: string[];
export const FIGURES: RegExp;
export function packInfo(cwd?: string): { bytes: number; files: number; unpackedBytes: number };
export function figuresText(info: { bytes: number; files: number; unpackedBytes: number }): string;
