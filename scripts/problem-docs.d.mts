export function problemReference(
  problems: Record<string, { status: number; title: string; type: string }>,
  moduleText: string,
): string;
