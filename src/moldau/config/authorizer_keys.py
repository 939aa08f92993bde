"""The broker keys of the authorizer: which one (``authorizer.class.name``), who is above it
(``super.users``) and what a resource without ACLs allows (``allow.everyone.if.no.acl.found``).

All three are static, as in Kafka. An empty ``authorizer.class.name`` (the default) means no
authorizer: every authenticated client may do everything.
"""

from __future__ import annotations

from ..security.authorizer import AUTHORIZER_CLASSES
from .definitions import ConfigKey, ConfigType, Importance, OneOf

AUTHORIZER_KEYS: list[ConfigKey] = [
    ConfigKey("authorizer.class.name", ConfigType.STRING, "",
              "The authorizer: kafka.security.authorizer.AclAuthorizer or "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer (the same ACL rules in "
              "moldau); empty for none.", Importance.LOW, OneOf(("", *AUTHORIZER_CLASSES))),
    ConfigKey("super.users", ConfigType.STRING, "",
              "Principals, separated by semicolons, that may do everything whatever the ACLs "
              "(e.g. User:admin;User:ANONYMOUS).", Importance.LOW),
    ConfigKey("allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, False,
              "With an authorizer: whether a resource with no ACL at all is open to everyone.",
              Importance.LOW),
]
