// tap's coverage map: which source files each test file is held to (tap's default threshold
// is 100%). Only the pure packages are measured: lease-core (every decision) and protocol (the
// contract between processes) must be covered completely; the daemons are exercised by
// real-process tests whose coverage tap cannot attribute.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

function sources(dir) {
  return readdirSync(dir, { recursive: true })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f));
}

const core = sources('packages/lease-core/src');
const protocol = sources('packages/protocol/src');

export default function coverageMap(testFile) {
  const f = testFile.replaceAll('\\', '/');
  if (f.includes('test/lease-core/')) return core;
  if (f.includes('test/protocol/')) return protocol;
  return null;
}
