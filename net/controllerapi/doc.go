// Package controllerapi serves the CONTROLLER listener of a voter (Kafka's
// ControllerApis, beside the broker listeners' KafkaApis in net/kafka): raft messages
// between voters (SamsaRaft), the brokers' requests to the active controller and the
// admin requests brokers forward, handed to the Controller as they are, the brokers'
// metadata fetches answered from the voter's committed log (Fetch, FetchSnapshot),
// DescribeCluster of the controllers and ApiVersions of its own table. A request is
// parsed and answered by net/request; on a secured listener its connection's session
// is net/connauth's, and the authorizer applies the broker listener's rule of the API
// (Config.Rules) with the controller's own checks (security.go).
package controllerapi
