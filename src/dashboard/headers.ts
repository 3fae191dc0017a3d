// The security headers of the dashboard's pages and the review page, set by helmet: exactly the
// ones they have always had (a Content-Security-Policy without 'unsafe-inline', the referrer
// policy, nosniff), and none of helmet's other defaults, so that nothing changes for a browser
// or a proxy behind which Errand runs (Strict-Transport-Security, for one, is the operator's).
import type { FastifyHelmetOptions } from '@fastify/helmet';

export function securityHeaders(opts: {
  directives: Record<string, string[]>;
  referrer: 'same-origin' | 'no-referrer';
  nosniff: boolean;
}): FastifyHelmetOptions {
  return {
    global: true,
    contentSecurityPolicy: { useDefaults: false, directives: opts.directives },
    referrerPolicy: { policy: opts.referrer },
    // Helmet refuses `true` for a header it sets by default: left out, nosniff is on.
    ...(opts.nosniff ? {} : { xContentTypeOptions: false }),
    crossOriginEmbedderPolicy: false,
    crossOriginOpenerPolicy: false,
    crossOriginResourcePolicy: false,
    originAgentCluster: false,
    strictTransportSecurity: false,
    xDnsPrefetchControl: false,
    xDownloadOptions: false,
    xFrameOptions: false,
    xPermittedCrossDomainPolicies: false,
    xPoweredBy: false,
    xXssProtection: false,
  };
}
