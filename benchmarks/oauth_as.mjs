// A real OAuth 2.1 authorization server for tests and benchmarks: oidc-provider (npm,
// pinned in benchmarks/oauth_server.py) on loopback, with client_credentials and an
// RFC 8693 token-exchange grant written here. Usage: node as.mjs PORT CONFIG_JSON
// CONFIG_JSON: {"clients": [{client_id, client_secret}], "resources": {url: {scope}},
// "authorization_code": false}. With "authorization_code": true it also offers what an MCP
// client needs to run the flow unaided: dynamic client registration (RFC 7591), the
// authorization-code grant with PKCE (S256) required of every client, and oidc-provider's
// development login and consent pages, which accept any login and password. Those pages
// are for tests and demos only: never put this server in front of real users.
// Prints "ready <issuer>" on stdout once it listens.
import Provider, { errors } from 'oidc-provider';
import * as jose from 'jose';

const [port, configJson] = process.argv.slice(2);
const config = JSON.parse(configJson);
const issuer = `http://127.0.0.1:${port}`;

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await jose.exportJWK(privateKey)), kid: 'test-key-1', alg: 'RS256', use: 'sig' };

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS = 'urn:ietf:params:oauth:token-type:access_token';

const codeFlow = config.authorization_code === true;
// Every scope a resource knows: an MCP client asks for the scopes the gateway advertises,
// and the authorization request is refused for one the server has never heard of.
// offline_access turns on the refresh_token grant, which MCP clients register for.
const scopes = [...new Set(['tools:read', 'tools:admin', 'backend:read',
  ...Object.values(config.resources).flatMap((info) => info.scope.split(' ')),
  ...(codeFlow ? ['offline_access'] : [])])];

const provider = new Provider(issuer, {
  clients: config.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials', EXCHANGE],
    redirect_uris: [],
    response_types: [],
    scope: c.scope ?? 'tools:read tools:admin backend:read',
  })),
  jwks: { keys: [jwk] },
  scopes,
  // OAuth 2.1: PKCE for every authorization-code client, public or confidential.
  pkce: { required: () => true },
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: codeFlow },
    registration: { enabled: codeFlow },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        const info = config.resources[resource];
        if (!info) throw new errors.InvalidTarget();
        return { scope: info.scope, audience: resource, accessTokenFormat: 'jwt',
                 accessTokenTTL: info.ttl || 300, jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
});

const { d, p, q, dp, dq, qi, ...publicJwk } = jwk;
const localKeys = jose.createLocalJWKSet({ keys: [publicJwk] });
let exchanges = 0;

provider.registerGrantType(EXCHANGE, async (ctx) => {
  exchanges += 1;
  const { subject_token: subjectToken, subject_token_type: type, audience, scope } = ctx.oidc.params;
  if (type !== ACCESS) throw new errors.InvalidRequest('unsupported subject_token_type');
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(subjectToken, localKeys, { issuer }));
  } catch (e) {
    throw new errors.InvalidGrant(`subject_token: ${e.code || e.message}`);
  }
  const info = config.resources[audience];
  if (!info) throw new errors.InvalidTarget('unknown audience');
  const granted = (scope || info.scope).split(' ').filter((s) => info.scope.split(' ').includes(s));
  const resourceServer = new provider.ResourceServer(audience, {
    scope: info.scope, audience, accessTokenFormat: 'jwt', accessTokenTTL: info.ttl || 300,
    jwt: { sign: { alg: 'RS256' } },
  });
  const token = new provider.AccessToken({
    accountId: claims.sub, client: ctx.oidc.client, grantId: `tx-${exchanges}`,
    scope: granted.join(' '), resourceServer, gty: 'token-exchange',
  });
  const value = await token.save();
  ctx.body = {
    access_token: value, issued_token_type: ACCESS, token_type: 'Bearer',
    expires_in: token.expiration, scope: token.scope,
  };
}, ['subject_token', 'subject_token_type', 'audience', 'resource', 'scope', 'requested_token_type',
    'actor_token', 'actor_token_type']);

// Test-only endpoints: the number of exchanges answered (a cache hit sends none), and
// a token signed with this server's own key that expired two minutes ago (the
// gateway allows 30 s of clock skew, and a test should not wait for a real expiry).
provider.use(async (ctx, next) => {
  if (ctx.path === '/test/exchanges') { ctx.body = { exchanges }; return; }
  if (ctx.path === '/test/expired') {
    const now = Math.floor(Date.now() / 1000);
    ctx.body = {
      access_token: await new jose.SignJWT({ scope: 'tools:read', client_id: 'agent-a' })
        .setProtectedHeader({ alg: 'RS256', kid: 'test-key-1', typ: 'at+jwt' })
        .setIssuer(issuer).setSubject('agent-a').setAudience(ctx.query.aud)
        .setIssuedAt(now - 420).setExpirationTime(now - 120).sign(privateKey),
    };
    return;
  }
  await next();
});

provider.listen(Number(port), '127.0.0.1', () => { console.log(`ready ${issuer}`); });
