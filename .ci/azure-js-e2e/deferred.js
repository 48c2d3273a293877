// jQuery's Deferred and when, as the E2E suites use them (jQuery itself needs a DOM): callbacks run at once when
// settled, then() chains (a callback's returned promise is followed), when() waits for every promise.
function Deferred() {
    var state = 'pending', args = [], done = [], fail = [];
    function settle(to, values) {
        if (state !== 'pending') { return; }
        state = to; args = values;
        (to === 'resolved' ? done : fail).forEach(function (f) { f.apply(null, args); });
        done = []; fail = [];
    }
    var promise = {
        state: function () { return state; },
        done: function (f) { if (f) { if (state === 'resolved') { f.apply(null, args); } else if (state === 'pending') { done.push(f); } } return this; },
        fail: function (f) { if (f) { if (state === 'rejected') { f.apply(null, args); } else if (state === 'pending') { fail.push(f); } } return this; },
        always: function (f) { return this.done(f).fail(f); },
        then: function (onDone, onFail) {
            var next = Deferred();
            function relay(callback, settleNext) {
                return function () {
                    if (!callback) { return settleNext.apply(null, arguments); }
                    var result = callback.apply(null, arguments);
                    if (result && typeof result.then === 'function') {
                        result.then(function () { next.resolve.apply(null, arguments); },
                                    function () { next.reject.apply(null, arguments); });
                    } else {
                        next.resolve(result);
                    }
                };
            }
            this.done(relay(onDone, next.resolve)).fail(relay(onFail, next.reject));
            return next.promise();
        },
        promise: function () { return promise; }
    };
    var deferred = Object.create(promise);
    deferred.resolve = function () { settle('resolved', Array.prototype.slice.call(arguments)); return deferred; };
    deferred.reject = function () { settle('rejected', Array.prototype.slice.call(arguments)); return deferred; };
    deferred.promise = function () { return promise; };
    return deferred;
}

function when() {
    var promises = Array.prototype.slice.call(arguments), all = Deferred();
    if (promises.length === 0) { return all.resolve().promise(); }
    var remaining = promises.length, values = [];
    promises.forEach(function (p, i) {
        if (!p || typeof p.then !== 'function') { values[i] = p; if (--remaining === 0) { all.resolve.apply(null, values); } return; }
        p.then(function () {
            values[i] = arguments.length > 1 ? Array.prototype.slice.call(arguments) : arguments[0];
            if (--remaining === 0) { all.resolve.apply(null, values); }
        }, function () { all.reject.apply(null, arguments); });
    });
    return all.promise();
}

module.exports = { Deferred: Deferred, when: when };
