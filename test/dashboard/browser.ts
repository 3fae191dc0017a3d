// Debian's chromium driven by playwright-core (no browser download). Tests that need it are
// skipped with a printed reason where it is not installed; CI installs it (.ci/run).
import { execFileSync } from 'node:child_process';
import { type Browser, chromium, type Page } from 'playwright-core';

function findChromium(): string | undefined {
  try {
    return (
      execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

export const chromiumPath = findChromium();

/** The reason browser tests are skipped, printed by node:test; undefined when they run. */
export const browserSkipReason = chromiumPath
  ? undefined
  : 'browser tests skipped: no chromium on PATH (apt-get install chromium)';

/** Signs in with the key on the sign-in form and waits for the projects page. */
export async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${url}/projects`);
}

export async function launchBrowser(): Promise<Browser> {
  if (!chromiumPath) throw new Error(browserSkipReason);
  return chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
}
