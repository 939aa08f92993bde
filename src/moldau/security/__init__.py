"""Authorization: Kafka's ACL model (:mod:`.acls`) and the authorizer that checks it
(:mod:`.authorizer`). Pure code: no sockets, no broker, no metadata store."""
