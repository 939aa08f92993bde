"""The authorizer's rules (Kafka's AclAuthorizer): super users, deny wins, implied DESCRIBE,
wildcards, prefixed patterns, hosts, allow.everyone.if.no.acl.found, the cache's
invalidation; the ACL filters of DescribeAcls/DeleteAcls; the JSON kept in stores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
    Permission,
    ResourceType,
)
from moldau.security.authorizer import Authorizer, parse_super_users

Op, T, P = AclOperation, ResourceType, PatternType
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(name: str, op: AclOperation, permission: Permission = ALLOW,
        principal: str = "User:alice", host: str = "*", rtype: ResourceType = T.TOPIC,
        pattern: PatternType = P.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def check(auth: Authorizer, op: AclOperation, name: str = "orders",
          principal: str = "User:alice", host: str = "10.0.0.1",
          rtype: ResourceType = T.TOPIC) -> bool:
    return auth.authorize(principal, host, op, rtype, name)


def test_nothing_is_allowed_without_acls_unless_configured() -> None:
    assert not check(Authorizer(), Op.READ)
    assert check(Authorizer(allow_if_no_acl=True), Op.READ)


def test_allow_if_no_acl_only_where_no_acl_exists() -> None:
    auth = Authorizer(allow_if_no_acl=True)
    auth.add([acl("orders", Op.READ, principal="User:bob")])
    assert not check(auth, Op.READ)  # the topic has ACLs, none for alice
    assert check(auth, Op.READ, name="other")


def test_super_users_may_do_everything() -> None:
    auth = Authorizer(parse_super_users(" User:admin ; User:ops;"))
    auth.add([acl("orders", Op.ALL, DENY, principal="User:admin")])
    assert check(auth, Op.DELETE, principal="User:admin")
    assert check(auth, Op.CLUSTER_ACTION, "kafka-cluster", "User:ops", rtype=T.CLUSTER)
    assert not check(auth, Op.READ, principal="User:other")


def test_allow_read_implies_describe_but_deny_implies_nothing() -> None:
    auth = Authorizer()
    auth.add([acl("orders", Op.READ)])
    assert check(auth, Op.READ) and check(auth, Op.DESCRIBE)
    assert not check(auth, Op.WRITE)
    auth.add([acl("orders", Op.READ, DENY)])
    assert not check(auth, Op.READ)
    # As in Kafka: the allow on READ still implies DESCRIBE; a deny on READ denies READ only.
    assert check(auth, Op.DESCRIBE)
    auth.add([acl("orders", Op.DESCRIBE, DENY)])
    assert not check(auth, Op.DESCRIBE)


def test_alter_configs_implies_describe_configs() -> None:
    auth = Authorizer()
    auth.add([acl("orders", Op.ALTER_CONFIGS)])
    assert check(auth, Op.DESCRIBE_CONFIGS)
    assert not check(auth, Op.DESCRIBE)


def test_deny_wins_over_allow_and_wildcards() -> None:
    auth = Authorizer()
    auth.add([acl("*", Op.ALL, principal="User:*"), acl("orders", Op.WRITE, DENY)])
    assert check(auth, Op.READ)
    assert not check(auth, Op.WRITE)
    assert check(auth, Op.WRITE, principal="User:bob")
    assert check(auth, Op.WRITE, name="payments")


def test_prefixed_acls_cover_names_that_start_with_the_prefix() -> None:
    auth = Authorizer()
    auth.add([acl("team-a.", Op.WRITE, pattern=P.PREFIXED),
              acl("team-a.secret", Op.WRITE, DENY, pattern=P.PREFIXED)])
    assert check(auth, Op.WRITE, "team-a.orders")
    assert not check(auth, Op.WRITE, "team-a.secret-plans")
    assert not check(auth, Op.WRITE, "team-b.orders")
    assert not check(auth, Op.WRITE, "team-a")


def test_hosts_match_exactly_or_by_wildcard() -> None:
    auth = Authorizer()
    auth.add([acl("orders", Op.READ, host="10.0.0.1"),
              acl("orders", Op.READ, DENY, host="10.0.0.66")])
    assert check(auth, Op.READ, host="10.0.0.1")
    assert not check(auth, Op.READ, host="10.0.0.2")
    auth.add([acl("orders", Op.READ, host="*")])
    assert check(auth, Op.READ, host="10.0.0.2")
    assert not check(auth, Op.READ, host="10.0.0.66")


def test_resource_types_are_separate() -> None:
    auth = Authorizer()
    auth.add([acl("orders", Op.READ, rtype=T.GROUP)])
    assert check(auth, Op.READ, rtype=T.GROUP)
    assert not check(auth, Op.READ, rtype=T.TOPIC)


def test_the_cache_is_dropped_when_acls_change() -> None:
    auth = Authorizer()
    assert not check(auth, Op.READ)
    binding = acl("orders", Op.READ)
    auth.add([binding])
    assert check(auth, Op.READ)
    auth.remove([binding])
    assert not check(auth, Op.READ)
    auth.replace_resource(T.TOPIC, "orders", P.LITERAL, [binding])
    assert check(auth, Op.READ)
    auth.replace_all([])
    assert not check(auth, Op.READ)


def test_authorized_operations_bits() -> None:
    auth = Authorizer()
    auth.add([acl("g", Op.READ, rtype=T.GROUP)])
    bits = auth.authorized_operations("User:alice", "h", T.GROUP, "g")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_authorize_any_topic_for_idempotent_producers() -> None:
    auth = Authorizer()
    assert not auth.authorize_any("User:alice", "h", Op.WRITE, T.TOPIC)
    auth.add([acl("x", Op.WRITE, pattern=P.PREFIXED)])
    assert auth.authorize_any("User:alice", "h", Op.WRITE, T.TOPIC)
    auth.add([acl("x", Op.WRITE, DENY, pattern=P.PREFIXED)])
    assert not auth.authorize_any("User:alice", "h", Op.WRITE, T.TOPIC)


def test_filters() -> None:
    literal = acl("orders", Op.READ)
    prefixed = acl("ord", Op.WRITE, pattern=P.PREFIXED)
    wildcard = acl("*", Op.DESCRIBE, principal="User:bob")
    group = acl("orders", Op.READ, rtype=T.GROUP)
    every = [literal, prefixed, wildcard, group]

    def select(f: AclFilter) -> list[AclBinding]:
        return [a for a in every if f.matches(a)]

    assert select(AclFilter()) == every
    assert select(AclFilter(T.TOPIC)) == [literal, prefixed, wildcard]
    assert select(AclFilter(T.TOPIC, "orders")) == [literal]
    assert select(AclFilter(T.TOPIC, "orders", P.MATCH)) == [literal, prefixed, wildcard]
    assert select(AclFilter(pattern_type=P.PREFIXED)) == [prefixed]
    assert select(AclFilter(principal="User:bob")) == [wildcard]
    assert select(AclFilter(operation=Op.WRITE)) == [prefixed]
    with pytest.raises(InvalidAcl):
        AclFilter(pattern_type=P.UNKNOWN).validate()


@pytest.mark.parametrize(("binding", "message"), [
    (acl("", Op.READ), "Resource name should not be empty"),
    (acl("x", Op.ANY), "Invalid operation"),
    (acl("x", Op.READ, pattern=P.MATCH), "Invalid pattern type"),
    (acl("x", Op.READ, principal="alice"), "Could not parse principal"),
    (acl("x", Op.READ, rtype=T.ANY), "Invalid resource type"),
    (acl("other", Op.ALTER, rtype=T.CLUSTER), "kafka-cluster"),
])
def test_bindings_kafka_refuses(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAcl, match=message):
        binding.validate()


def test_json_as_kafka_writes_it() -> None:
    binding = acl("orders", Op.CLUSTER_ACTION, DENY, rtype=T.TRANSACTIONAL_ID)
    assert binding.entry_json() == {"principal": "User:alice", "permissionType": "Deny",
                                    "operation": "ClusterAction", "host": "*"}
    assert AclBinding.from_json(binding.to_json()) == binding


names = st.text("ab.-", min_size=1, max_size=6)


@given(names, names, st.booleans(), st.sampled_from([Op.READ, Op.WRITE, Op.ALL]),
       st.sampled_from([ALLOW, DENY]))
def test_one_acl_decides_like_its_definition(resource: str, pattern_name: str,
                                             prefixed: bool, op: AclOperation,
                                             permission: Permission) -> None:
    """With a single ACL, a READ is allowed exactly when the ACL applies and allows it."""
    pattern = P.PREFIXED if prefixed else P.LITERAL
    auth = Authorizer()
    auth.add([acl(pattern_name, op, permission, pattern=pattern)])
    applies = resource.startswith(pattern_name) if prefixed else resource == pattern_name
    expected = applies and permission is ALLOW and op in (Op.READ, Op.ALL)
    assert check(auth, Op.READ, resource) is expected
