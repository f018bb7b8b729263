// A real OpenID provider for the console's SSO tests: panva's oidc-provider (OpenID Certified), on 127.0.0.1.
//
// Written from oidc-provider's own documentation:
//   docs/README.md (https://github.com/panva/node-oidc-provider/blob/main/docs/README.md): "Accounts" (findAccount
//   and claims()), "User flows" (interactions.url, provider.interactionDetails / interactionFinished),
//   "Custom Grant Types" (provider.registerGrantType), "Configuration options" (clients, jwks, claims, cookies.keys,
//   features.devInteractions, features.rpInitiatedLogout and its logoutSource / postLogoutSuccessSource, pkce).
//   The spec it implements for logout: OpenID Connect RP-Initiated Logout 1.0.
//
// Run by tests/oidc_provider.py (a pytest session fixture), which reads the one JSON line this prints once it
// listens, and stops it by PID. Environment:
//   OIDC_TEST_REDIRECT_URIS        comma-separated redirect URIs of the console client (its callback URLs)
//   OIDC_TEST_POST_LOGOUT_URIS     comma-separated post_logout_redirect_uris of the console client
//   OIDC_TEST_CONTROL_TOKEN        bearer token for the test-only control endpoint below
//
// What it offers:
//   * a confidential client `console` (client_secret_basic; authorization code; PKCE is enforced for every
//     client that sends a code_challenge, and the console always does);
//   * test accounts (alice, bob, carol, dave) with a password and a `groups` claim (scope `groups`), shown on a
//     plain login page of our own (devInteractions are off: they accept any name without a password);
//     consent for the first-party console client is given without a page;
//   * RP-initiated logout (end_session_endpoint in discovery), with a confirmation page of our own (the default
//     page loads a web font from the internet);
//   * CI-style ID tokens for the token-exchange work: a client `ci-runner` (client_secret_basic) may use the
//     custom grant `urn:gpuc:test:ci-id-token` at the real token endpoint. It answers {"id_token": ...}: a JWT
//     signed with this provider's published key (same kid, same JWKS), iss = this issuer, with the claims the
//     request asks for (aud, sub, project_path, ref, ref_protected, ... and exp_in seconds, negative for an
//     already expired token). oidc-provider's own IdToken model always sets aud to the requesting client's id,
//     and a GitLab/GitHub job token's aud is the relying party's URL, so the grant signs the JWT itself with
//     jose (the JOSE library oidc-provider itself uses) and the provider's private key, which this script made;
//   * POST /_test/accounts/<id> {"groups": [...], "email": "...", "name": "..."} (bearer OIDC_TEST_CONTROL_TOKEN):
//     change an account's groups, e-mail address or name (any of them), as an IdP admin would between two logins.
import { randomBytes, randomUUID, generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';

import { SignJWT, importJWK } from 'jose';
import Provider, { errors } from 'oidc-provider';

const CI_GRANT = 'urn:gpuc:test:ci-id-token';
const CI_PARAMS = ['aud', 'sub', 'project_path', 'namespace_path', 'ref', 'ref_type', 'ref_protected',
  'pipeline_id', 'job_id', 'environment', 'repository', 'exp_in', 'iss_override', 'nonce'];
const CONTROLLED_CLAIMS = ['groups', 'email', 'name'];
const CONTROL_TOKEN = process.env.OIDC_TEST_CONTROL_TOKEN || randomBytes(16).toString('hex');
const list = (name) => (process.env[name] || '').split(',').map((s) => s.trim()).filter(Boolean);

export const ACCOUNTS = {
  alice: { password: 'alice-pass', email: 'alice@example.test', name: 'Alice Adams', groups: ['gpu-platform-admins', 'gpu:research:tenant-admin'] },
  bob: { password: 'bob-pass', email: 'bob@example.test', name: 'Bob Brown', groups: ['gpu:research:member'] },
  carol: { password: 'carol-pass', email: 'carol@example.test', name: 'Carol Clark', groups: ['gpu:vision:viewer'] },
  dave: { password: 'dave-pass', email: 'dave@example.test', name: 'Dave Davis', groups: [] },
};

const html = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) => `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>${html(title)}</title></head>
<body><main><h1>${html(title)}</h1>${body}</main></body></html>`;

function readBody(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (chunk) => { data += chunk; if (data.length > 65536) req.destroy(); });
    req.on('end', () => resolve(data));
    req.on('error', reject);
  });
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJwk = { ...privateKey.export({ format: 'jwk' }), kid: `test-${randomUUID().slice(0, 8)}`, alg: 'RS256', use: 'sig' };

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'console',
        client_secret: 'console-test-secret',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: list('OIDC_TEST_REDIRECT_URIS'),
        post_logout_redirect_uris: list('OIDC_TEST_POST_LOGOUT_URIS'),
        token_endpoint_auth_method: 'client_secret_basic',
      },
      {
        client_id: 'ci-runner',
        client_secret: 'ci-runner-test-secret',
        grant_types: [CI_GRANT],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: [signingJwk] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
      groups: ['groups'],
    },
    async findAccount(ctx, id) {
      const account = ACCOUNTS[id];
      if (!account) return undefined;
      return {
        accountId: id,
        async claims() {
          return {
            sub: id, email: account.email, email_verified: true, name: account.name, preferred_username: id, groups: account.groups,
          };
        },
      };
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        async logoutSource(ctx, form) {
          ctx.body = page('Sign out of the test identity provider?', `${form}
<button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`);
        },
        async postLogoutSuccessSource(ctx) {
          ctx.body = page('Signed out', '<p>You are signed out of the test identity provider.</p>');
        },
      },
    },
    async renderError(ctx, out) {
      ctx.type = 'html';
      ctx.body = page('Identity provider error', `<pre>${html(JSON.stringify(out, null, 2))}</pre>`);
    },
  });

  provider.registerGrantType(CI_GRANT, async (ctx) => {
    const p = ctx.oidc.params;
    if (!p.aud) throw new errors.InvalidRequest('aud is required');
    const now = Math.floor(Date.now() / 1000);
    const claims = {};
    for (const name of CI_PARAMS) {
      if (p[name] !== undefined && !['aud', 'sub', 'exp_in', 'iss_override'].includes(name)) claims[name] = p[name];
    }
    const projectPath = p.project_path || 'ml/llm-train';
    const ref = p.ref || 'main';
    const key = await importJWK(signingJwk, 'RS256');
    const idToken = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: signingJwk.kid, typ: 'JWT' })
      .setIssuer(p.iss_override || issuer)
      .setAudience(p.aud)
      .setSubject(p.sub || `project_path:${projectPath}:ref_type:${p.ref_type || 'branch'}:ref:${ref}`)
      .setIssuedAt(now)
      .setNotBefore(now - 5)
      .setExpirationTime(now + Number(p.exp_in || 300))
      .setJti(randomUUID())
      .sign(key);
    ctx.body = { id_token: idToken, token_type: 'N_A', issued_token_type: 'urn:ietf:params:oauth:token-type:id_token' };
  }, CI_PARAMS);

  const callback = provider.callback();
  server.on('request', async (req, res) => {
    try {
      const url = new URL(req.url, issuer);
      const interaction = url.pathname.match(/^\/interaction\/([\w-]+)$/);
      const control = url.pathname.match(/^\/_test\/accounts\/(\w+)$/);
      if (interaction) return await handleInteraction(provider, req, res);
      if (control && req.method === 'POST') {
        if (req.headers.authorization !== `Bearer ${CONTROL_TOKEN}` || !ACCOUNTS[control[1]]) {
          res.writeHead(404).end();
          return undefined;
        }
        const body = JSON.parse(await readBody(req));
        const account = ACCOUNTS[control[1]];
        for (const claim of CONTROLLED_CLAIMS) if (body[claim] !== undefined) account[claim] = body[claim];
        const now = Object.fromEntries(CONTROLLED_CLAIMS.map((claim) => [claim, account[claim]]));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(now));
        return undefined;
      }
      return callback(req, res);
    } catch (err) {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
      return undefined;
    }
  });
  process.stdout.write(`${JSON.stringify({ issuer, pid: process.pid, control_token: CONTROL_TOKEN })}\n`);
});

async function handleInteraction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session } = details;
  if (prompt.name === 'consent') {
    // The console is a first-party client: consent to what it asked for without a page.
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }
  let error = '';
  if (req.method === 'POST') {
    const form = new URLSearchParams(await readBody(req));
    const account = ACCOUNTS[form.get('login')];
    if (account && account.password === form.get('password')) {
      return provider.interactionFinished(req, res, { login: { accountId: form.get('login') } }, { mergeWithLastSubmission: false });
    }
    error = '<p role="alert">Wrong user name or password.</p>';
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(page('Test identity provider: sign in', `${error}
<form method="post" action="/interaction/${html(uid)}">
<label>User name <input name="login" autocomplete="username" autofocus></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button>
</form>`));
  return undefined;
}

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
