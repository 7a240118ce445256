/**
 * "Did you mean …?" for the command lines and config files: the known word nearest to what was
 * typed. Pure and dependency-free, a subpath of its own (`@hq/runtime/suggest`), so the light
 * fence path of `hq` can use it without loading anything else.
 */

/** Levenshtein distance (insertions, deletions, substitutions; a swap of neighbours counts 1). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = [];
  for (let i = 0; i <= a.length; i++) d.push([i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j++) (d[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    const prev = d[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      // A transposition of two neighbours ("rloe" for "role") is one typo, not two.
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, ((d[i - 2] as number[])[j - 2] as number) + 1);
      row[j] = v;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/**
 * The candidate nearest to `typed`, or null when none is near enough to be a typo: a candidate
 * that `typed` is a prefix of (`--rec` → `recheck`), else the smallest edit distance within a
 * third of the longer word (at least 1, at most 3). Case is ignored; ties go to the first
 * candidate, so list the common ones first.
 */
export function nearest(typed: string, candidates: readonly string[]): string | null {
  const t = typed.toLowerCase();
  if (t === '') return null;
  const prefixed = candidates.filter((c) => c.toLowerCase().startsWith(t));
  if (prefixed.length === 1) return prefixed[0] as string;
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const dist = editDistance(t, c.toLowerCase());
    const limit = Math.min(3, Math.max(1, Math.floor(Math.max(t.length, c.length) / 3)));
    if (dist <= limit && dist < bestDistance) {
      best = c;
      bestDistance = dist;
    }
  }
  return best;
}

/** `" (did you mean X?)"` for a message, or `""` when nothing is near. */
export function didYouMean(
  typed: string,
  candidates: readonly string[],
  show: (c: string) => string = (c) => c,
): string {
  const n = nearest(typed, candidates);
  return n === null ? '' : ` (did you mean ${show(n)}?)`;
}
