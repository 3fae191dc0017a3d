// Single sign-on to the dashboard through a real OpenID provider (oidc-provider on IPv6
// loopback, a different site from the service) in Chromium: the whole redirect dance ends
// signed in and shows who; a wrong state, an expired ID token and a deactivated user are
// refused with no session; group-based admins and roles come through; key sign-in is off.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, mock, test } from 'node:test';
import { sql } from 'kysely';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createLogger } from '../../src/log.ts';
import { startOidcProvider, type TestProvider } from '../support/oidc-provider.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser } from './browser.ts';

const ADA = { sub: 'ada', email: 'ada@example.test', name: 'Ada Admin', groups: ['errand-admins'] };
const BOB = { sub: 'bob', email: 'bob@example.test', name: 'Bob Builder', groups: ['team-a'] };
const DANA = { sub: 'dana', email: 'dana@example.test', name: 'Dana Leaving', groups: [] };

describe('dashboard single sign-on (OpenID Connect)', { skip: browserSkipReason }, () => {
  let idp: TestProvider;
  let svc: TestService;
  let browser: Browser;
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });
  before(async () => {
    idp = await startOidcProvider([ADA, BOB, DANA]);
    svc = await startTestService({
      worker: false,
      log: createLogger('trace', logSink),
      env: {
        ERRAND_OIDC_ISSUER: idp.issuer,
        ERRAND_OIDC_CLIENT_ID: idp.clientId,
        ERRAND_OIDC_CLIENT_SECRET: idp.clientSecret,
        ERRAND_OIDC_ALLOW_HTTP: 'true',
        ERRAND_OIDC_NAME: 'Test IdP',
        ERRAND_OIDC_SCOPES: 'openid email profile groups',
        ERRAND_OIDC_ADMIN_GROUPS: 'errand-admins',
      },
    });
    idp.register(`${svc.url}/auth/oidc/callback`);
    browser = await launchBrowser();
  });
  after(async () => {
    mock.timers.reset();
    await browser?.close();
    await svc?.close();
    await idp?.close();
  });
  const db = () => svc.service.ctx.db;
  /** Authorization codes the provider sent, to look for in the logs. */
  const codes: string[] = [];
  const sessionsOf = async (sub: string) =>
    Number(
      (
        await sql<{ n: string }>`
          SELECT count(*) AS n FROM dashboard_sessions s JOIN users u ON u.id = s.user_id
          WHERE u.subject = ${sub}`.execute(db())
      ).rows[0]?.n,
    );

  /** From Errand's sign-in page through the provider's login and consent, up to the callback. */
  async function atProvider(page: Page, login: string): Promise<void> {
    await page.goto(`${svc.url}/`);
    await page.getByRole('link', { name: 'Sign in with Test IdP' }).click();
    await page.waitForURL(`${idp.issuer}/**`);
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill('any');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
  }

  async function signedInAs(person: typeof ADA): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext();
    const page = await context.newPage();
    await atProvider(page, person.sub);
    await page.waitForURL(`${svc.url}/projects`);
    return { context, page };
  }

  test('the sign-in page offers the provider and no key form; a key post is refused', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${svc.url}/`);
    await page.getByRole('link', { name: 'Sign in with Test IdP' }).waitFor();
    assert.equal(await page.getByLabel('API key').count(), 0);
    const res = await fetch(`${svc.url}/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: svc.url },
      body: new URLSearchParams({ key: svc.adminKey }).toString(),
      redirect: 'manual',
    });
    assert.equal(res.status, 403);
    assert.equal(res.headers.get('set-cookie'), null, 'no session');
    await context.close();
  });

  test('the whole redirect dance: signed in, shown by name and email, an admin by group; sign-out ends it', async () => {
    const { context, page } = await signedInAs(ADA);
    const who = page.locator('#signed-in-as');
    assert.match((await who.textContent()) ?? '', /Ada Admin\s*\(ada@example\.test\)/);
    await page.getByRole('link', { name: 'Admin keys' }).waitFor();
    const user = await db()
      .selectFrom('users')
      .selectAll()
      .where('subject', '=', 'ada')
      .executeTakeFirstOrThrow();
    assert.equal(user.issuer, idp.issuer);
    assert.equal(user.email, ADA.email);
    assert.equal(user.name, ADA.name);
    assert.deepEqual(user.groups, ['errand-admins']);
    assert.equal(user.admin, true);
    assert.match(user.id, /^usr_/);
    assert.equal(await sessionsOf('ada'), 1);
    // The sign-in in progress was used once: its cookie is gone.
    const cookies = await context.cookies();
    assert.ok(!cookies.some((c) => c.name === 'errand_oidc_login'));

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${svc.url}/`);
    assert.equal(await sessionsOf('ada'), 0);
    await page.goto(`${svc.url}/projects`);
    await page.waitForURL(`${svc.url}/`);
    await context.close();
  });

  test("a member's roles come from their groups: they see that project, not the admin pages", async () => {
    const mine = await svc.createProject({ name: 'team a project' });
    await svc.createProject({ name: 'someone else' });
    await db()
      .insertInto('project_roles')
      .values({ project_id: mine.id, grantee_kind: 'group', grantee: 'team-a', role: 'member' })
      .execute();
    const { context, page } = await signedInAs(BOB);
    assert.match((await page.locator('#signed-in-as').textContent()) ?? '', /Bob Builder/);
    await page.getByRole('row', { name: /team a project/ }).waitFor();
    assert.equal(await page.getByRole('row', { name: /someone else/ }).count(), 0);
    assert.equal(await page.getByRole('link', { name: 'Admin keys' }).count(), 0);
    const user = await db()
      .selectFrom('users')
      .select('admin')
      .where('subject', '=', 'bob')
      .executeTakeFirstOrThrow();
    assert.equal(user.admin, false);
    await context.close();
  });

  test('a wrong state is refused, with no session; the answer cannot be replayed', async () => {
    const context = await browser.newContext();
    // A sign-in starts in one tab; another tab of the same browser starts a second one, so the
    // first one's answer comes back with a state this browser no longer expects.
    const first = await context.newPage();
    await first.goto(`${svc.url}/`);
    await first.getByRole('link', { name: 'Sign in with Test IdP' }).click();
    await first.waitForURL(`${idp.issuer}/**`);
    const second = await context.newPage();
    await second.goto(`${svc.url}/auth/oidc/login`);
    await second.waitForURL(`${idp.issuer}/**`);
    const before = await sessionsOf('bob');
    await first.locator('input[name="login"]').fill('bob');
    await first.locator('input[name="password"]').fill('any');
    await first.getByRole('button', { name: 'Sign-in' }).click();
    await first.getByRole('button', { name: 'Continue' }).click();
    await first.getByText('wrong state').waitFor();
    const answer = new URL(first.url());
    assert.equal(answer.pathname, '/auth/oidc/callback');
    const code = answer.searchParams.get('code');
    assert.ok(code, 'the provider did send a code');
    codes.push(code);
    assert.equal(await sessionsOf('bob'), before);
    // The sign-in in progress was spent on the refusal: the same answer again, and the second
    // tab's own answer, are refused too.
    const again = await first.goto(answer.href);
    assert.equal(again?.status(), 401);
    await first.getByText('no sign-in was started in this browser').waitFor();
    await second.locator('input[name="login"]').fill('bob');
    await second.locator('input[name="password"]').fill('any');
    // Bob consented in the first tab: the provider asks no more and answers at once.
    await second.getByRole('button', { name: 'Sign-in' }).click();
    await second.getByText('no sign-in was started in this browser').waitFor();
    assert.equal(await sessionsOf('bob'), before);
    await context.close();
  });

  test('an expired ID token is refused, with no session', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    // The provider issues the token now; this process's clock then reads two hours later, so
    // the service finds the token (valid for an hour) expired. No real time passes.
    idp.afterToken = () => {
      idp.afterToken = undefined;
      mock.timers.enable({ apis: ['Date'], now: Date.now() + 2 * 3600 * 1000 });
    };
    const before = await sessionsOf('ada');
    try {
      await atProvider(page, 'ada');
      await page.getByText('ID token has expired').waitFor();
    } finally {
      idp.afterToken = undefined;
      mock.timers.reset();
    }
    assert.equal(new URL(page.url()).pathname, '/auth/oidc/callback');
    assert.equal(await sessionsOf('ada'), before);
    await context.close();
  });

  test('a deactivated user: the next request is signed out, and signing in again is refused', async () => {
    const { context, page } = await signedInAs(DANA);
    assert.equal(await sessionsOf('dana'), 1);
    await db()
      .updateTable('users')
      .set({ deactivated_at: sql<Date>`now()` })
      .where('subject', '=', 'dana')
      .execute();
    await page.goto(`${svc.url}/projects`);
    await page.waitForURL(`${svc.url}/`);
    assert.equal(await sessionsOf('dana'), 0, 'the session is deleted at once');
    await context.close();

    // Through the provider again (a new browser: the provider's own session would skip its form).
    const fresh = await browser.newContext();
    const again = await fresh.newPage();
    await atProvider(again, 'dana');
    await again.getByText('this user has been deactivated').waitFor();
    assert.equal(new URL(again.url()).pathname, '/auth/oidc/callback');
    assert.equal(await sessionsOf('dana'), 0);
    await fresh.close();
  });

  test('neither the client secret nor an authorization code is ever logged', () => {
    assert.ok(logged.includes('dashboard sign-in'), 'the service logged at trace level');
    assert.ok(!logged.includes(idp.clientSecret));
    assert.ok(codes.length > 0);
    for (const code of codes) assert.ok(!logged.includes(code), 'no authorization code');
    // Where the callback's URL is logged (a failed request), its code is redacted.
    let line = '';
    const sink = new Writable({
      write(chunk, _encoding, done) {
        line += String(chunk);
        done();
      },
    });
    createLogger('info', sink).error(
      { url: '/auth/oidc/callback?code=the-code-123&state=abc' },
      'dashboard request failed',
    );
    assert.match(line, /callback\?code=\[redacted\]&state=abc/);
  });
});

describe('dashboard single sign-on: key sign-in kept, provider down', () => {
  let svc: TestService;
  before(async () => {
    // A loopback port with nothing listening: the provider is down.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    svc = await startTestService({
      worker: false,
      env: {
        ERRAND_OIDC_ISSUER: `http://127.0.0.1:${port}`,
        ERRAND_OIDC_CLIENT_ID: 'errand',
        ERRAND_OIDC_CLIENT_SECRET: 'a-secret-for-a-provider-that-is-down',
        ERRAND_OIDC_ALLOW_HTTP: 'true',
        ERRAND_DASHBOARD_KEY_SIGNIN: 'true',
      },
    });
  });
  after(async () => {
    await svc?.close();
  });

  test('the service starts; the sign-in page offers both; the key still signs in', async () => {
    const page = await fetch(`${svc.url}/`, { headers: { accept: 'text/html' } });
    const body = await page.text();
    assert.match(body, /href="\/auth\/oidc\/login">Sign in with 127\.0\.0\.1</);
    assert.match(body, /<label for="key">API key<\/label>/);
    const res = await fetch(`${svc.url}/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: svc.url },
      body: new URLSearchParams({ key: svc.adminKey }).toString(),
      redirect: 'manual',
    });
    assert.equal(res.status, 303);
    assert.match(res.headers.get('set-cookie') ?? '', /^errand_session=/);
  });

  test('signing in through a provider that is down: a 503 page that says so, no cookie', async () => {
    const res = await fetch(`${svc.url}/auth/oidc/login`, {
      headers: { accept: 'text/html' },
      redirect: 'manual',
    });
    assert.equal(res.status, 503);
    assert.match(await res.text(), /the identity provider could not be reached/);
    assert.equal(res.headers.get('set-cookie'), null);
  });
});
