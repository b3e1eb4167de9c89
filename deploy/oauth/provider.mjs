// A real OAuth 2 / OpenID Connect authorization server for the reference service: panva's oidc-provider,
// configured for machine clients (client_credentials) that get JWT access tokens bound to the MCP resource
// (RFC 8707 resource indicators), with the tenant and role claims the service reads.
//
// Started by the integration tests (tests/oauth_server.py) and by `docker compose --profile auth`.
// Environment:
//   OAUTH_PORT       port to listen on (default 9000); OAUTH_HOST address (default 127.0.0.1)
//   OAUTH_ISSUER     issuer URL (default http://127.0.0.1:PORT); the service checks the tokens' iss against it
//   OAUTH_RESOURCES  comma-separated resource indicators tokens may be issued for (the first is the default)
//   OAUTH_OPAQUE_RESOURCES  those of them whose access tokens are opaque (checked by introspection, RFC 7662)
//   OAUTH_CLIENTS_FILE  JSON array of clients: client_id, client_secret, scope, tenant, role (default
//                    clients.json beside this file)
//   OAUTH_JWKS_FILE  a private JWK set {"keys": [...]}; the first key signs. Unset: a new RS256 key per start.
//   OAUTH_TOKEN_TTL  access token lifetime in seconds (default 600)
//   OAUTH_MODULES    folder holding node_modules/oidc-provider when it is not beside this file (the tests' cache)
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { generateKeyPairSync } from 'node:crypto';

const here = dirname(fileURLToPath(import.meta.url));
const env = process.env;
const modules = env.OAUTH_MODULES;
const { default: Provider } = await import(
  modules ? pathToFileURL(join(modules, 'node_modules', 'oidc-provider', 'lib', 'index.js')).href : 'oidc-provider'
);

const host = env.OAUTH_HOST || '127.0.0.1';
const port = Number(env.OAUTH_PORT || 9000);
const issuer = env.OAUTH_ISSUER || `http://127.0.0.1:${port}`;
const list = (value) => (value || '').split(',').map((r) => r.trim()).filter(Boolean);
const resources = list(env.OAUTH_RESOURCES || 'http://localhost:8000/mcp');
const opaque = list(env.OAUTH_OPAQUE_RESOURCES);
const ttl = Number(env.OAUTH_TOKEN_TTL || 600);
const clients = JSON.parse(readFileSync(env.OAUTH_CLIENTS_FILE || join(here, 'clients.json'), 'utf8'));

function signingKeys() {
  if (env.OAUTH_JWKS_FILE) return JSON.parse(readFileSync(env.OAUTH_JWKS_FILE, 'utf8'));
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { keys: [{ ...jwk, kid: `generated-${Date.now()}`, alg: 'RS256', use: 'sig' }] };
}

// Every scope a client may hold (the discovery document's scopes_supported).
const scopes = [...new Set(clients.flatMap((c) => (c.scope || '').split(' ').filter(Boolean)))];

const provider = new Provider(issuer, {
  // A client's scopes are what it may be granted (allowed_scope), not a list to refuse requests against: a
  // request for more gets the subset it may have (RFC 6749 section 3.3), as MCP clients ask for every scope the
  // resource supports.
  clients: clients.map(({ client_id, client_secret, scope, tenant, role, token_endpoint_auth_method }) => ({
    client_id,
    client_secret,
    allowed_scope: scope || '',
    tenant,
    role,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: token_endpoint_auth_method || 'client_secret_basic',
  })),
  extraClientMetadata: { properties: ['tenant', 'role', 'allowed_scope'] },
  scopes: ['openid', ...scopes],
  jwks: signingKeys(),
  ttl: { ClientCredentials: ttl },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resources[0],
      useGrantedResource: () => true,
      // The token's scope is the requested scopes this client may have, for this resource.
      getResourceServerInfo: (ctx, resource, client) => {
        if (!resources.includes(resource)) {
          throw new Provider.errors.InvalidTarget(`unknown resource ${resource}`);
        }
        const info = { scope: client.allowed_scope, audience: resource, accessTokenTTL: ttl };
        return opaque.includes(resource) ? { ...info, accessTokenFormat: 'opaque' }
          : { ...info, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
  // The claims the reference service reads to find who is calling (app/auth.py: tenant, role).
  extraTokenClaims: (ctx, token) => {
    const client = ctx.oidc.client;
    return client ? { tenant: client.tenant, role: client.role } : undefined;
  },
  clientBasedCORS: () => true,
  renderError: (ctx, out) => {
    ctx.type = 'json';
    ctx.body = out;
  },
});
provider.proxy = true;

const server = provider.listen(port, host, () => {
  console.log(`oidc-provider ${issuer} listening on ${host}:${port}; resources ${resources.join(' ')}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => process.exit(0)); // nothing to flush: tokens live in memory only
}
