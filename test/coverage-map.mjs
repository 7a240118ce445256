// tap's coverage map: which source files each test file is held to (tap's default threshold
// is 100%). Only lease-core is measured: it is the pure core and must be covered completely;
// the daemons are exercised by real-process tests whose coverage tap cannot attribute.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const core = 'packages/lease-core/src';
const coreFiles = readdirSync(core)
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(core, f));

export default function coverageMap(testFile) {
  return testFile.replaceAll('\\', '/').includes('test/lease-core/') ? coreFiles : null;
}
