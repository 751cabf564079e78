package configs

// StaticInSamsa are the broker keys Kafka's documentation gives a dynamic update mode
// (per-broker or cluster-wide) that Samsa reads only when the node starts: altering
// them at run time is refused (INVALID_CONFIG, "cannot be updated dynamically"), each
// for the reason given. Every other key of Kafka's takes Kafka's update mode
// (TestUpdateModesAreKafkas), and the dynamic ones act without a restart
// (net/node/dynamic.go, the replica manager's log configurations, the quotas).
var StaticInSamsa = map[string]string{
	"remote.log.manager.copy.max.bytes.per.second":  "the remote log manager is built when the node starts",
	"remote.log.reader.threads":                     "the remote log manager is built when the node starts",
	"remote.log.manager.fetch.max.bytes.per.second": "the remote log manager is built when the node starts",
	"remote.fetch.max.wait.ms":                      "the remote log manager is built when the node starts",
	"listeners":                                     "listeners are bound when the node starts",
	"listener.security.protocol.map":                "listeners are bound when the node starts",
	"num.network.threads":                           "the transports' goroutines are set when the node starts",
	"num.io.threads":                                "the reactor's workers are set when the node starts",
	"num.recovery.threads.per.data.dir":             "no effect in Samsa",
	"ssl.keystore.type":                             "a listener's TLS configuration is read when the node starts (its PEM files are watched and reloaded)",
	"ssl.keystore.location":                         "as ssl.keystore.type",
	"ssl.keystore.password":                         "as ssl.keystore.type",
	"ssl.keystore.key":                              "as ssl.keystore.type",
	"ssl.keystore.certificate.chain":                "as ssl.keystore.type",
	"ssl.key.password":                              "as ssl.keystore.type",
	"ssl.truststore.type":                           "as ssl.keystore.type",
	"ssl.truststore.location":                       "as ssl.keystore.type",
	"ssl.truststore.password":                       "as ssl.keystore.type",
	"ssl.truststore.certificates":                   "as ssl.keystore.type",
	"ssl.client.auth":                               "as ssl.keystore.type",
	"ssl.enabled.protocols":                         "as ssl.keystore.type",
	"ssl.protocol":                                  "as ssl.keystore.type",
	"ssl.cipher.suites":                             "as ssl.keystore.type",
	"ssl.endpoint.identification.algorithm":         "as ssl.keystore.type",
	"ssl.keymanager.algorithm":                      "no effect in Samsa",
	"ssl.trustmanager.algorithm":                    "no effect in Samsa",
	"sasl.enabled.mechanisms":                       "a listener's SASL configuration is read when the node starts",
	"sasl.mechanism.inter.broker.protocol":          "the inter-broker client is built when the node starts",
	"sasl.jaas.config":                              "a listener's SASL configuration is read when the node starts",
	"principal.builder.class":                       "a listener's SASL configuration is read when the node starts",
}
